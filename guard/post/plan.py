"""A query over protected answers, read into its inner queries and its outer query.

:func:`plan_outer` is the one front end of post-processing, as ``read_query`` is of
plain queries: the guard (to answer), the PostgreSQL endpoint's Describe (to type the
columns) and tests call it. It runs stages 1-3 of every inner query through
``read_query`` (so each inner query is accepted or refused exactly as if asked alone),
and checks, qualifies and grades the outer query. Nothing reads data here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.qualify import qualify

from guard.errors import QueryRejected
from guard.policy.model import Analyst, NoiseMode, Policy
from guard.post.allow import check_outer
from guard.post.labels import label
from guard.post.outer import (
    ANSWER_PREFIX,
    Leaf,
    computes_on_aggregates,
    find_leaves,
    is_outer_shape,
    sources,
)
from guard.post.split import row_aggregates, split_select
from guard.post.taint import grade
from guard.query.front import FrontResult, read_query, visible_tables
from guard.query.parameters import Parameter
from guard.query.parse import DIALECT, parse
from guard.query.shape import AggFunc, OutputKind
from guard.query.validate import validate

__all__ = ["MAX_INNER_QUERIES", "Inner", "OuterPlan", "explain_inners", "plan_outer"]

#: inner queries one request may ask: each is a full protected query, logged alone
MAX_INNER_QUERIES = 16
#: the clauses of a SELECT that splitting knows where to put
_SPLIT_CLAUSES = frozenset(
    {"expressions", "from_", "from", "where", "group", "having", "qualify", "order", "limit", "offset"}
    | {"distinct"}
)


@dataclass(frozen=True)
class Inner:
    """One inner query: asked as its own request, its answer loaded as table ``table``."""

    sql: str
    front: FrontResult
    table: str
    columns: tuple[str, ...]
    #: DuckDB types of the answer's columns
    types: tuple[str, ...]
    #: which columns hold aggregates (they can be withheld or noised: a level column)
    graded: tuple[bool, ...]

    @property
    def levelled(self) -> dict[str, bool]:
        """Per lower-cased column name: whether it has a level column."""
        return {c.lower(): g for c, g in zip(self.columns, self.graded, strict=True)}


@dataclass(frozen=True)
class OuterPlan:
    inners: tuple[Inner, ...]
    #: the graded outer query: its outputs, then each output's level
    sql: str
    columns: tuple[str, ...]
    #: outputs that can be withheld or noised (computed from aggregates)
    graded: tuple[bool, ...]


def explain_inners(plan: OuterPlan) -> str:
    """Why ``guard explain`` does not explain a query over protected answers, and what
    to explain instead: its inner queries, each answered as if asked alone (a later one
    after the earlier ones' releases, so it is explained after they are asked)."""
    if len(plan.inners) == 1:
        return (
            "this query is computed on the answer of an inner query, protected and recorded as if "
            f"asked alone; explain shows one protected answer: explain the inner query instead: "
            f"{plan.inners[0].sql}"
        )
    listed = "; ".join(f"({n}) {inner.sql}" for n, inner in enumerate(plan.inners, start=1))
    return (
        f"this query is computed on the answers of {len(plan.inners)} inner queries, each protected and "
        "recorded as if asked alone; explain shows one protected answer: explain each inner query "
        f"instead, in this order (each is asked after the ones before it): {listed}"
    )


def plan_outer(
    sql: str,
    policy: Policy,
    analyst: Analyst,
    column_types: Callable[[str], Mapping[str, str]],
    parameters: Sequence[Parameter] | None = None,
) -> OuterPlan | None:
    """The inner and outer queries of ``sql``, or None when ``sql`` is not a query over
    protected answers (the plain query path's message then stands).

    Raises:
        QueryRejected: an inner query is refused (its own message), or the outer query
            does something other than compute on the answers.
    """
    tree = parse(sql, policy.limits, parameters)
    if isinstance(tree, exp.Select) and _reads_no_row(tree):
        return _no_row_plan(tree, policy, analyst)
    if not isinstance(tree, exp.Query) or not is_outer_shape(tree):
        return None
    leaves = find_leaves(tree)
    if not leaves:
        return None  # reads no protected answer: nothing to post-process
    if len(leaves) > MAX_INNER_QUERIES:
        raise QueryRejected(
            f"the query reads {len(leaves)} inner queries; the limit is {MAX_INNER_QUERIES}: "
            "ask fewer at once"
        )
    inners = []
    for i, leaf in enumerate(leaves):
        inner, replacement = _inner(leaf, f"{ANSWER_PREFIX}{i}", policy, analyst, column_types)
        inners.append(inner)
        if leaf.select is tree:
            tree = replacement
        else:
            leaf.select.replace(replacement)
    check_outer(tree, frozenset(inner.table for inner in inners))
    _label(tree)
    spelled = _spellings(tree, inners)
    schema: dict[str, object] = {i.table: dict(zip(i.columns, i.types, strict=True)) for i in inners}
    try:
        qualified = qualify(tree, schema=schema, dialect=DIALECT, quote_identifiers=True)
    except OptimizeError as error:
        raise QueryRejected(
            f"{_first_line(error)}: a query over protected answers reads only the columns of its "
            "inner queries"
        ) from None
    except SqlglotError as error:
        raise QueryRejected(f"cannot read the query over protected answers: {_first_line(error)}") from None
    assert isinstance(qualified, exp.Query)
    graded = grade(qualified, {inner.table.lower(): inner.levelled for inner in inners})
    names = tuple(spelled.get(name.lower(), name) for name in graded.names)
    return OuterPlan(tuple(inners), qualified.sql(dialect=DIALECT), names, graded.graded)


def _spellings(tree: exp.Expr, inners: Sequence[Inner]) -> dict[str, str]:
    """Each name as the analyst spelled it, by its lower-cased form: qualifying folds
    names to lower case (DuckDB compares them so), but an output is labelled as written
    (Superset reads back its alias "AVG(income)")."""
    spelled: dict[str, str] = {}
    for inner in inners:
        for column in inner.columns:
            spelled.setdefault(column.lower(), column)
    for select in tree.find_all(exp.Select):
        for projection in select.expressions:
            if isinstance(projection, exp.Alias):
                spelled[projection.alias.lower()] = projection.alias
    return spelled


_NOT_IN_A_PROBE = ("joins", "group", "having", "qualify", "distinct", "with_", "windows")


def _reads_no_row(select: exp.Select) -> bool:
    """A probe that reads no row of its table: constant outputs, ``LIMIT 0``, and no
    column anywhere (Metabase asks ``SELECT TRUE AS "_" FROM t WHERE 1 <> 1 LIMIT 0``
    to learn whether it may read ``t``)."""
    limit = select.args.get("limit")
    amount = limit.expression if isinstance(limit, exp.Limit) else None
    if not (isinstance(amount, exp.Literal) and amount.this == "0"):
        return False
    if any(select.args.get(k) for k in _NOT_IN_A_PROBE):
        return False
    constants = all(isinstance(p.unalias(), exp.Literal | exp.Boolean | exp.Null) for p in select.expressions)
    return constants and not select.find(exp.Column, exp.Subquery, exp.Star)


def _no_row_plan(select: exp.Select, policy: Policy, analyst: Analyst) -> OuterPlan:
    """The plan of a probe that reads no row: its table checked as any query's is (so an
    undeclared table or a catalog is refused in the same words), its answer computed on
    no answer at all."""
    validate(select.copy(), visible_tables(policy, analyst))
    _label(select)
    constants = exp.select(*(p.copy() for p in select.expressions)).limit(0)
    names = tuple(p.alias_or_name for p in select.expressions)
    return OuterPlan((), constants.sql(dialect=DIALECT), names, tuple(False for _ in names))


def _inner(
    leaf: Leaf,
    table: str,
    policy: Policy,
    analyst: Analyst,
    column_types: Callable[[str], Mapping[str, str]],
) -> tuple[Inner, exp.Select]:
    """The inner query of ``leaf`` and the SELECT over its answer that replaces it: the
    leaf as written when the guard answers it so, else its split."""
    written = leaf.select.sql(dialect=DIALECT)
    try:
        front = read_query(written, policy, analyst, column_types)
    except QueryRejected:
        if not _splittable(leaf):
            raise  # a plain query after all: its own message stands
        source = sources(leaf.select)[0]
        declared = policy.table(source.name)
        columns = frozenset(c.name.lower() for c in declared.columns) if declared is not None else frozenset()
        split = split_select(leaf.select, table, columns)
        asked = split.inner.sql(dialect=DIALECT)
        front = read_query(asked, policy, analyst, column_types)
        if split.stray:  # the plain query refuses these; in case it did not:
            raise QueryRejected(
                f"column {split.stray[0]} must appear in GROUP BY or inside an aggregate (COUNT, SUM, AVG)"
            ) from None
        return _answer_table(asked, front, table, policy, analyst, column_types), split.outer
    inner = _answer_table(written, front, table, policy, analyst, column_types)
    every = [exp.column(c, table=table, quoted=True).as_(c, quoted=True) for c in inner.columns]
    name = exp.to_identifier(table, quoted=True)
    source = exp.Table(this=name, alias=exp.TableAlias(this=name.copy()))
    return inner, exp.select(*every).from_(source)


def _splittable(leaf: Leaf) -> bool:
    """Whether ``leaf`` is a SELECT over one table that computes on its aggregates and has
    nothing else the plain path would refuse in the part that reads rows."""
    select = leaf.select
    if not leaf.splittable or not isinstance(sources(select)[0], exp.Table):
        return False
    if any(key not in _SPLIT_CLAUSES for key, value in select.args.items() if value):
        return False
    nested = any(isinstance(n, exp.Query | exp.Subquery) for n in select.walk() if n is not select)
    # a window over the table's rows, with no aggregate to read them: not post-processing
    return not nested and computes_on_aggregates(select) and bool(row_aggregates(select))


def _answer_table(
    sql: str,
    front: FrontResult,
    table: str,
    policy: Policy,
    analyst: Analyst,
    column_types: Callable[[str], Mapping[str, str]],
) -> Inner:
    shape = front.shape
    engine = {k.lower(): v for k, v in column_types(front.table.name).items()}
    noised = policy.noise_mode(front.table, analyst, shape.summed) is NoiseMode.NOISE
    names: list[str] = []
    types: list[str] = []
    graded: list[bool] = []
    for output in shape.outputs[: front.answered_outputs]:
        name, n = output.name, 1
        while name.lower() in {x.lower() for x in names}:
            name, n = f"{output.name}_{n}", n + 1
        names.append(name)
        graded.append(output.kind is OutputKind.AGGREGATE)
        if output.kind is OutputKind.KEY:
            types.append(engine.get(shape.group_by[output.index].lower(), "VARCHAR"))
        elif output.kind is OutputKind.GROUPING:
            types.append("BIGINT")
        else:
            aggregate = shape.aggregates[output.index]
            measure = engine.get((aggregate.column or "").lower(), "DOUBLE").upper()
            types.append(_aggregate_type(aggregate.func, measure, noised))
    return Inner(sql, front, table, tuple(names), tuple(types), tuple(graded))


def _aggregate_type(func: AggFunc, measure: str, noised: bool) -> str:
    """The type the guard answers an aggregate with (as the PostgreSQL Describe says)."""
    if func is AggFunc.COUNT:
        return "BIGINT"
    if func is AggFunc.AVG or noised or measure.startswith(("DOUBLE", "FLOAT", "REAL")):
        return "DOUBLE"
    if measure.startswith("DECIMAL"):
        scale = measure.rstrip(")").split(",")[-1].strip() if "," in measure else "0"
        return f"DECIMAL(38, {scale})"
    return "HUGEINT"


def _label(tree: exp.Expr) -> None:
    """Alias every unaliased output with the label PostgreSQL gives it."""
    for select in list(tree.find_all(exp.Select)):
        for projection in list(select.expressions):
            if not isinstance(projection, exp.Alias | exp.Star) and not (
                isinstance(projection, exp.Column) and projection.is_star
            ):
                projection.replace(exp.alias_(projection.copy(), label(projection), quoted=True))


def _first_line(error: Exception) -> str:
    """The first line of sqlglot's message, without its position in the rewritten text."""
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return text.split(". Line:")[0][:200]
