"""Find the inner queries of a query over protected answers, and check what remains.

An *inner query* is a SELECT that reads a table (a name that is not a CTE in scope):
it is answered by the guard as if asked alone. Everything around the inner queries —
subqueries in FROM, CTEs, UNION, joins of answers, the computation of a SELECT on its
own aggregates — is the *outer query*, which reads only the inner queries' answers. The
outer query may contain nothing that reads anything else: :func:`check_outer` allows
a listed set of constructs (scalar arithmetic and functions, CASE, casts, comparisons,
aggregates and window functions over the answers' rows), and nothing that names a file,
a catalog, a setting or a table.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sqlglot import exp

from guard.errors import QueryRejected

__all__ = [
    "Leaf",
    "aggregate_units",
    "check_outer",
    "computes_on_aggregates",
    "find_leaves",
    "is_outer_shape",
    "sources",
]

#: names of the answer tables the outer query reads are this prefix and a number
ANSWER_PREFIX = "_q"


@dataclass(frozen=True)
class Leaf:
    """One inner query: a SELECT node of the tree (replaced in place by the planner)."""

    select: exp.Select
    #: one table and no join: the SELECT can be split into its plain aggregate query and
    #: a computation on top (a SELECT that joins tables is sent as written, and refused)
    splittable: bool


def is_outer_shape(tree: exp.Expr) -> bool:
    """Whether ``tree`` asks for a computation over protected answers: a set operation,
    a CTE, a subquery, or a SELECT that computes on its own aggregates
    (:func:`computes_on_aggregates`). Anything else is a plain query, which the plain
    path accepts or refuses with its own message."""
    if isinstance(tree, exp.SetOperation) or (isinstance(tree, exp.Query) and tree.args.get("with_")):
        return True
    if not isinstance(tree, exp.Select):
        return False
    return any(isinstance(node, exp.Subquery) for node in tree.walk()) or computes_on_aggregates(tree)


def computes_on_aggregates(select: exp.Select) -> bool:
    """Whether ``select`` computes with its aggregates beyond naming them: an output
    that is an expression of aggregates (``SUM(x) / COUNT(*)``, ``ROUND(AVG(x))``) or a
    constant beside them (a label, as a UNION's branches have), HAVING, QUALIFY, a
    window function, or DISTINCT over aggregates."""
    if select.args.get("having") is not None or select.args.get("qualify") is not None:
        return True
    units = [unit for p in select.expressions for unit in aggregate_units(p)]
    if select.args.get("distinct") is not None and units:
        return True
    for projection in select.expressions:
        node = projection.unalias().unnest()
        if node.find(exp.Window):
            return True
        inside = list(aggregate_units(node))
        if inside and inside != [node]:
            return True
        if units and not inside and not node.find(exp.Column, exp.Star):
            return True  # a constant output
    return False


#: wrappers that belong to the aggregate they hold (the plain query judges them whole)
_WRAPPERS = (exp.Filter, exp.IgnoreNulls, exp.RespectNulls, exp.WithinGroup)


def aggregate_units(node: exp.Expr) -> Iterator[exp.Expr]:
    """The row aggregates under ``node``: aggregates and GROUPING() that read the rows of
    the SELECT they are in (not a window's function, whose argument they may be), with
    their FILTER or IGNORE NULLS; outermost only, not inside subqueries."""
    stack = [node]
    while stack:
        current = stack.pop()
        if current is not node and isinstance(current, exp.Query | exp.Subquery):
            continue
        windowed = isinstance(current.parent, exp.Window) and current.arg_key == "this"
        if isinstance(current, exp.AggFunc | exp.Grouping | exp.GroupingId) and not windowed:
            unit: exp.Expr = current
            while isinstance(unit.parent, _WRAPPERS):
                unit = unit.parent
            yield unit
            continue
        stack.extend(reversed(list(current.iter_expressions())))


def find_leaves(tree: exp.Query) -> list[Leaf]:
    """The inner queries of ``tree``, in the order they appear.

    Raises:
        QueryRejected: a FROM source is neither a table, a CTE nor a subquery, or a set
            operation other than UNION.
    """
    leaves: list[Leaf] = []
    _walk(tree, frozenset(), leaves)
    return leaves


def _walk(query: exp.Expr, ctes: frozenset[str], leaves: list[Leaf]) -> None:
    with_ = query.args.get("with_")
    if with_ is not None:
        if with_.args.get("recursive"):
            raise QueryRejected("WITH RECURSIVE is not allowed over protected answers: write each step")
        for cte in with_.expressions:
            _walk(cte.this, ctes, leaves)
            ctes = ctes | {cte.alias.lower()}
    if isinstance(query, exp.Subquery):
        _walk(query.this, ctes, leaves)
    elif isinstance(query, exp.Union):
        _walk(query.left, ctes, leaves)
        _walk(query.right, ctes, leaves)
    elif isinstance(query, exp.SetOperation):
        raise QueryRejected(
            f"{type(query).__name__.upper()} is not allowed: combine protected answers with UNION "
            "[ALL] or a join"
        )
    elif isinstance(query, exp.Select):
        read = sources(query)
        if any(_reads_table(s, ctes) for s in read):
            leaves.append(Leaf(query, len(read) == 1))
            return
        for source in read:
            if isinstance(source, exp.Subquery):
                _walk(source, ctes, leaves)
            elif not isinstance(source, exp.Table):
                raise QueryRejected(_source_message(source))
    else:
        raise QueryRejected(
            f"{query.sql(dialect='duckdb')[:60]} is not allowed: send a SELECT of aggregates, or a "
            "query over such SELECTs"
        )


def sources(select: exp.Select) -> list[exp.Expr]:
    """What ``select`` reads: its FROM source, then each join's."""
    from_ = select.args.get("from_") or select.args.get("from")
    first = [from_.this] if from_ is not None else []
    return first + [join.this for join in select.args.get("joins") or []]


def _reads_table(source: exp.Expr, ctes: frozenset[str]) -> bool:
    """A FROM source that is not a CTE or a subquery: a table (or something posing as
    one, which the plain query path refuses with its own message)."""
    if isinstance(source, exp.Table):
        named = isinstance(source.this, exp.Identifier) and not source.args.get("db")
        return not (named and not source.args.get("catalog") and source.name.lower() in ctes)
    return not isinstance(source, exp.Subquery)


def _source_message(source: exp.Expr) -> str:
    return (
        f"FROM {source.sql(dialect='duckdb')[:60]} is not allowed: a query over protected answers "
        "reads subqueries of aggregates and CTEs only"
    )


# --- the outer query's allow-list ---------------------------------------------------

_STRUCTURE: tuple[type[exp.Expr], ...] = (
    exp.Select,
    exp.Union,
    exp.Subquery,
    exp.From,
    exp.Join,
    exp.Table,
    exp.TableAlias,
    exp.With,
    exp.CTE,
    exp.Where,
    exp.Group,
    exp.Having,
    exp.Qualify,
    exp.Order,
    exp.Ordered,
    exp.Limit,
    exp.Offset,
    exp.Distinct,
    exp.Alias,
    exp.Column,
    exp.Identifier,
    exp.Star,
    exp.Literal,
    exp.Null,
    exp.Boolean,
    exp.Paren,
    exp.DataType,
    exp.DataTypeParam,
    exp.Tuple,
)
_SCALAR: tuple[type[exp.Expr], ...] = (
    exp.Neg,
    exp.Not,
    exp.And,
    exp.Or,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.IntDiv,
    exp.Mod,
    exp.Pow,
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.NullSafeEQ,
    exp.NullSafeNEQ,
    exp.Is,
    exp.In,
    exp.Between,
    exp.Like,
    exp.ILike,
    exp.Case,
    exp.If,
    exp.Coalesce,
    exp.Nullif,
    exp.Cast,
    exp.TryCast,
    exp.Round,
    exp.Abs,
    exp.Floor,
    exp.Ceil,
    exp.Trunc,
    exp.Sqrt,
    exp.Ln,
    exp.Log,
    exp.Exp,
    exp.Sign,
    exp.Greatest,
    exp.Least,
    exp.Concat,
    exp.DPipe,
    exp.Upper,
    exp.Lower,
    exp.Length,
    exp.Substring,
    exp.Left,
    exp.Right,
    exp.Trim,
)
#: aggregates over the answers' rows (in an outer GROUP BY or a window)
AGGREGATES: tuple[type[exp.Expr], ...] = (
    exp.Count,
    exp.CountIf,
    exp.Sum,
    exp.Avg,
    exp.Min,
    exp.Max,
    exp.Median,
    exp.Stddev,
    exp.StddevPop,
    exp.StddevSamp,
    exp.Variance,
    exp.VariancePop,
)
#: window functions over the answers' rows
RANKINGS: tuple[type[exp.Expr], ...] = (
    exp.RowNumber,
    exp.Rank,
    exp.DenseRank,
    exp.PercentRank,
    exp.CumeDist,
    exp.Ntile,
    exp.Lag,
    exp.Lead,
    exp.FirstValue,
    exp.LastValue,
    exp.NthValue,
)
_WINDOWS: tuple[type[exp.Expr], ...] = (exp.Window, exp.WindowSpec)
_ALLOWED = _STRUCTURE + _SCALAR + AGGREGATES + RANKINGS + _WINDOWS


def check_outer(tree: exp.Expr, answers: frozenset[str]) -> None:
    """Refuse anything in the outer query ``tree`` (inner queries already replaced by
    SELECTs over the answer tables ``answers``) that is not a computation on those
    answers.

    Raises:
        QueryRejected: the construct, and what to write instead.
    """
    for node in tree.walk():
        if isinstance(node, exp.Identifier) and "#" in node.name:
            raise QueryRejected(
                f"the name {node.name!r} is not allowed in a query over protected answers: "
                "'#' is reserved for the guard's own columns; choose another name"
            )
        if not isinstance(node, _ALLOWED):
            raise QueryRejected(_not_allowed(node))
        if isinstance(node, exp.Subquery) and not isinstance(node.parent, exp.From | exp.Join):
            raise QueryRejected(
                "subqueries in expressions are not allowed over protected answers: join the "
                "answers, or use a window function (SUM(x) OVER ())"
            )
        if isinstance(node, exp.In) and (node.args.get("query") or node.args.get("unnest")):
            raise QueryRejected("IN (SELECT ...) is not allowed over protected answers: join the answers")
        if isinstance(node, exp.Distinct) and node.args.get("on") is not None:
            raise QueryRejected("DISTINCT ON is not allowed over protected answers: use GROUP BY or a window")
        if isinstance(node, exp.TableAlias) and node.args.get("columns"):
            raise QueryRejected(
                "column aliases on a subquery (AS t(a, b)) are not allowed: alias the columns inside it"
            )
        if isinstance(node, exp.Table):
            _check_table(node, answers)
        if isinstance(node, exp.Limit | exp.Offset):
            amount = node.expression
            if node.args.get("limit_options") is not None or not (
                isinstance(amount, exp.Literal) and not amount.is_string and amount.this.isdigit()
            ):
                raise QueryRejected(f"{node.sql(dialect='duckdb').strip()}: use a whole number of rows")
        if isinstance(node, exp.Qualify) and not node.find(exp.Window):
            raise QueryRejected("QUALIFY filters on window functions: filter on aggregates with HAVING")
        if isinstance(node, exp.CTE) and node.alias.startswith(ANSWER_PREFIX):
            raise QueryRejected(
                f"the name {node.alias!r} is reserved for the guard's answer tables: choose another name"
            )


def _check_table(table: exp.Table, answers: frozenset[str]) -> None:
    if any(table.args.get(k) for k in table.args if k not in ("this", "alias")) or not isinstance(
        table.this, exp.Identifier
    ):
        raise QueryRejected(_source_message(table))
    name = table.name
    if name.startswith(ANSWER_PREFIX) and name not in answers:
        raise QueryRejected(_source_message(table))


def _not_allowed(node: exp.Expr) -> str:
    text = node.sql(dialect="duckdb")
    if len(text) > 60:
        text = text[:57] + "..."
    if isinstance(node, exp.Func):
        return (
            f"function {text} is not allowed in a query over protected answers: use arithmetic, "
            "ROUND, CAST, CASE, COALESCE, comparisons, and aggregates or window functions over "
            "the answers' rows"
        )
    return (
        f"{text} is not allowed in a query over protected answers: compute with the answers' "
        "columns (arithmetic, ROUND, CAST, CASE, COALESCE, comparisons, aggregates, windows)"
    )
