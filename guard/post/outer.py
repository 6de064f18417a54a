"""Find the inner queries of a query over protected answers.

An *inner query* is a SELECT that reads a table (a name that is not a CTE in scope):
it is answered by the guard as if asked alone. Everything around the inner queries —
subqueries in FROM, CTEs, UNION, joins of answers, the computation of a SELECT on its
own aggregates — is the *outer query*, which reads only the inner queries' answers
(``allow.py`` checks what it may contain).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sqlglot import exp

from guard.errors import QueryRejected

__all__ = [
    "ANSWER_PREFIX",
    "Leaf",
    "aggregate_units",
    "computes_on_aggregates",
    "find_leaves",
    "is_outer_shape",
    "source_message",
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
                raise QueryRejected(source_message(source))
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


def source_message(source: exp.Expr) -> str:
    return (
        f"FROM {source.sql(dialect='duckdb')[:60]} is not allowed: a query over protected answers "
        "reads subqueries of aggregates and CTEs only"
    )
