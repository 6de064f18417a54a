"""Listing the values of dimensions: ``SELECT DISTINCT d FROM t`` or ``SELECT d FROM t
GROUP BY d``, without an aggregate, optionally with WHERE on dimensions.

A list of values is asked of the guard as the COUNT(*) query it implies (the same
columns, grouped by them, with COUNT(*) appended under a name the analyst cannot
reach), so it passes through the whole query path: the same controls, history audit,
noise and log as that query. :func:`listed_answer` then keeps the rows whose count the
guard releases (or noises) and drops the count: a value is listed only where the number
of its rows would be released, so a value held by fewer than k privacy units is not
listed, nor one withheld to protect such a value. Counts are never part of the answer.

Withheld values are left out rather than shown as NULL: NULL is a value a dimension
may hold, and a list of values is read as a set. LIMIT and OFFSET apply to the listed
values, after the withheld ones are left out. Only dimensions can be listed: a
measure's values are confidential, one respondent's each.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sqlglot import exp

from guard.errors import QueryRejected
from guard.policy.model import Role, Table
from guard.query.shape import QueryShape
from guard.result import Flag, ProtectedResult

__all__ = ["HIDDEN_COUNT", "Listing", "as_count_query", "check_listable", "listed_answer"]

#: the label of the COUNT(*) a listing is asked as (never part of the answer)
HIDDEN_COUNT = "statguard_listed_rows"

_ORDER_HINT = "order a list of values by its columns (their names or positions)"


@dataclass(frozen=True)
class Listing:
    """A list of values: how many columns it lists, and its LIMIT and OFFSET, applied
    after the withheld values are left out."""

    columns: int
    limit: int | None = None
    offset: int = 0

    def detach(self, shape: QueryShape) -> tuple[QueryShape, Listing]:
        """The COUNT(*) query's shape without LIMIT/OFFSET (every value is judged), and
        this listing with them."""
        listing = dataclasses.replace(self, limit=shape.limit, offset=shape.offset)
        return dataclasses.replace(shape, limit=None, offset=0), listing


def as_count_query(tree: exp.Expr) -> tuple[exp.Expr, Listing | None]:
    """``tree`` itself, or, when it lists values (a SELECT without aggregate, with
    DISTINCT or GROUP BY), the COUNT(*) query it is asked as and its :class:`Listing`.

    Raises:
        QueryRejected: a list of values with something a list cannot have (DISTINCT ON,
            totals, expressions as columns, ordering by anything but its columns).
    """
    if not isinstance(tree, exp.Select) or not _lists_values(tree):
        return tree, None
    select = tree.copy()
    projections = list(select.expressions)
    for projection in projections:
        column = projection.this if isinstance(projection, exp.Alias) else projection
        if not isinstance(column.unnest(), exp.Column):
            raise QueryRejected(
                f"{projection.sql(dialect='duckdb')}: a list of values selects dimension columns only "
                "(SELECT DISTINCT dimension FROM table); to count, select COUNT(*) grouped by them"
            )
    distinct = select.args.get("distinct")
    group = select.args.get("group")
    if distinct is not None:
        if distinct.args.get("on") is not None:
            raise QueryRejected("SELECT DISTINCT ON (...) is not allowed: write SELECT DISTINCT columns")
        if group is not None:
            raise QueryRejected(
                "SELECT DISTINCT with GROUP BY is not allowed: to list values, write either "
                "SELECT DISTINCT columns or SELECT columns ... GROUP BY columns"
            )
        select.set("distinct", None)
        keys = [(p.this if isinstance(p, exp.Alias) else p).unnest().copy() for p in projections]
        select.set("group", exp.Group(expressions=keys))
    elif group is not None and (
        any(group.args.get(part) for part in ("rollup", "cube", "grouping_sets"))
        or group.find(exp.Rollup, exp.Cube, exp.GroupingSets)
    ):
        raise QueryRejected(
            "ROLLUP, CUBE and GROUPING SETS are not allowed in a list of values (it has no totals): "
            "GROUP BY the columns listed"
        )
    _check_order(select, len(projections))
    select.append("expressions", exp.alias_(exp.Count(this=exp.Star()), HIDDEN_COUNT, quoted=True))
    return select, Listing(len(projections))


def _lists_values(select: exp.Select) -> bool:
    if select.args.get("distinct") is None and select.args.get("group") is None:
        return False
    return not any(p.find(exp.AggFunc, exp.Grouping, exp.GroupingId) for p in select.expressions)


def _check_order(select: exp.Select, width: int) -> None:
    """ORDER BY may name the listed columns only: the count the list is asked with must
    not order it (that would tell how values compare in size)."""
    order = select.args.get("order")
    for ordered in order.expressions if order is not None else ():
        node = ordered.this.unnest()
        if isinstance(node, exp.Column) and node.name.lower() != HIDDEN_COUNT:
            continue
        if isinstance(node, exp.Literal) and not node.is_string and str(node.this).isdigit():
            if 1 <= int(str(node.this)) <= width:
                continue
            raise QueryRejected(f"ORDER BY {node.this}: there is no listed column at that position")
        raise QueryRejected(f"ORDER BY {node.sql(dialect='duckdb')} is not allowed: {_ORDER_HINT}")


def check_listable(select: exp.Select, listing: Listing, table: Table) -> None:
    """Only dimensions can be listed (identifiers and unknown names are the analysis
    stage's to refuse, with its messages).

    Raises:
        QueryRejected: a listed column is a measure.
    """
    for projection in select.expressions[: listing.columns]:
        node = (projection.this if isinstance(projection, exp.Alias) else projection).unnest()
        column = table.column(node.name) if isinstance(node, exp.Column) else None
        if column is not None and column.role is Role.MEASURE:
            dimensions = ", ".join(table.names(Role.DIMENSION)) or "none"
            raise QueryRejected(
                f"measure {column.name!r} cannot be listed: its values are confidential; only "
                f"dimensions' values can be listed ({dimensions}); aggregate it instead, "
                f"e.g. SUM({column.name}) or AVG({column.name})"
            )


def listed_answer(result: ProtectedResult, listing: Listing, k: int) -> ProtectedResult:
    """The list of values in ``result``, the answer to the COUNT(*) query of ``listing``
    (its count last): the rows whose count is released or noised, without the count,
    then OFFSET and LIMIT. ``k`` is the policy's query-set size, for the note.

    The notes of the count query describe counts and are replaced: one note says how
    many values are not listed, none when every value is.
    """
    withheld = Flag.SUPPRESSED.value
    count = listing.columns
    kept = [r for r, flags in enumerate(result.flags) if flags[count] != withheld]
    stop = None if listing.limit is None else listing.offset + listing.limit
    shown = kept[listing.offset : stop]
    notes = []
    missing = len(result.rows) - len(kept)
    if missing:
        notes.append(
            f"{missing} of {len(result.rows)} values not listed: a value is listed only where the "
            f"number of its rows could be released (at least k={k} privacy units, and not withheld "
            "to protect a smaller group)"
        )
    return ProtectedResult(
        list(result.columns[:count]),
        [result.rows[r][:count] for r in shown],
        [result.flags[r][:count] for r in shown],
        notes,
        (),
        None if result.levels is None else tuple(result.levels[r] for r in shown),
    )
