"""Stage 5: one backend query that returns, per cell, what every control needs.

For each group the query returns the group keys, each requested aggregate, and for each
aggregate the number of distinct privacy units in its query set (the rows it reads: all
selected rows for COUNT(*), those with a non-NULL value for COUNT/SUM/AVG of a column).
On request (``depth``) it also returns, per SUM/AVG column, the largest per-unit
contribution magnitudes and their total, which the sensitivity rules read. With grouping
sets (ROLLUP, CUBE, GROUPING SETS) every cell, detail or total, comes from the same pass,
with a grouping id telling which keys a row rolls up.

Everything is computed by the engine in one query. How the largest contributions are
found depends on the engine's declared capabilities (never on its name): with a native
top-n aggregate (DuckDB's ``max(x, n)``) and list functions, one pass with no window
function; otherwise, in standard SQL (PostgreSQL, Spark), either every per-unit
partial is ranked with ``row_number()`` over the cell and the first n ranks kept, or a
per-cell bound taken with MAX in the cell query itself leaves a few candidates to rank
(over the table's rows themselves when each unit has one row; see
:mod:`guard.plan.topn`). The query is built as a sqlglot tree, never by pasting the
analyst's text, and is generated in the engine's own dialect.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from sqlglot import exp

from guard.backends.base import DUCKDB_CAPABILITIES, Capabilities, TableInfo, TopN
from guard.engines import NUMERIC_TYPES
from guard.plan.sql import GID as _GID
from guard.plan.sql import column as _column
from guard.plan.sql import distinct_sets as _distinct_sets
from guard.plan.sql import grouping_id as _grouping_id
from guard.plan.sql import grouping_sets as _grouping_sets
from guard.plan.sql import where as _where
from guard.plan.topn import Top, bound, max_join, per_set, ranked, ranked_top
from guard.query.shape import AggFunc, Aggregate, QueryShape

__all__ = ["Plan", "rewrite"]


@dataclass(frozen=True)
class Plan:
    """The backend query and where each piece of a cell sits in its result rows.

    Rows come out ordered by the group keys (NULLS LAST), then by the grouping id.
    """

    query: exp.Select
    #: result column positions of the group keys (NULL in a row where the key is rolled up)
    key_slots: tuple[int, ...]
    #: per aggregate of the shape: result column of its value
    value_slots: tuple[int, ...]
    #: per aggregate of the shape: result column of its query set's unit count
    unit_slots: tuple[int, ...]
    #: result column of the grouping id (None for a plain GROUP BY): an integer bitmask
    #: over ``shape.group_by`` as DuckDB's GROUPING(k1, ..., kn) computes it, k1 the most
    #: significant bit; a bit is 1 when that key is rolled up (a total) in the row. Key i
    #: (0-based) is rolled up when ``gid >> (n - 1 - i) & 1``.
    grouping_slot: int | None = None
    #: per aggregate of the shape: result column of the list of the ``depth`` largest
    #: per-unit contribution magnitudes |x_u|, descending (x_u: the unit's rows in the
    #: cell summed; units with only NULLs left out; fewer entries when the cell has fewer
    #: units; NULL or [] for a cell without any value). None for COUNT or ``depth == 0``.
    top_slots: tuple[int | None, ...] = ()
    #: per aggregate of the shape: result column of Σ_u |x_u| over the cell (NULL for a
    #: cell without any value). None where ``top_slots`` is None.
    magnitude_slots: tuple[int | None, ...] = ()


class _Source(Enum):
    """What the outer aggregation reads."""

    #: the table's rows, one per unit (one row per unit, unless CELLS applies)
    ROWS = "rows"
    #: per-unit partials: one row per (cell, unit), the unit's rows summed (panel data)
    UNITS = "units"
    #: detail-cell partials: one row per cell of the finest grouping, rolled up into the
    #: grouping sets (one row per unit, grouping sets and depth > 0): top-n lists merge
    #: exactly because each unit sits in one detail cell, and the engine's top-n
    #: aggregate, its costliest part, then runs once per row instead of once per row and
    #: grouping set (2-3x faster on a 1M-row CUBE; at depth 0 one level is as fast)
    CELLS = "cells"


def rewrite(
    shape: QueryShape, info: TableInfo, depth: int = 0, capabilities: Capabilities = DUCKDB_CAPABILITIES
) -> Plan:
    """Build the cell query for ``shape`` over the table described by ``info``.

    With one row per privacy unit (checked when the snapshot was built) rows are units
    and plain counts suffice. Otherwise the query first sums each unit's rows inside
    each cell (GROUP BY keys, _uid), then aggregates those per-unit partials: counting
    units is then a plain count, much cheaper than COUNT(DISTINCT), and each unit's
    contribution to the cell is one number (what the sensitivity rules read).

    With grouping sets the per-unit partials are taken per (grouping set, unit), so a
    unit with rows in several detail cells counts once, with its summed contribution,
    in the total that covers them. With one row per unit and ``depth`` > 0, the detail
    cells are aggregated first and rolled up into the grouping sets.

    ``depth`` (>= 0) is how many of the largest contributions to return per SUM/AVG
    cell; 0 computes none (see :class:`Plan`). Without a native top-n aggregate
    (``capabilities.top_n``), contributions are ranked over per-unit partials (WINDOW),
    or bounded per cell and the candidates ranked (MAX_JOIN), over the rows with one
    row per unit and no grouping sets, otherwise over the per-unit partials.

    Raises:
        ValueError: ``depth`` is negative, or a grouping set names a key that is not in
            ``shape.group_by``.
    """
    if depth < 0:
        raise ValueError(f"depth must be >= 0, got {depth}")
    sets = _distinct_sets(shape)
    summed = bool(_summed(shape))
    top_n = capabilities.top_n
    if top_n is TopN.MAX_JOIN and not info.one_row_per_unit and not _exact_sums(shape, info):
        # its second pass sums each unit's rows again and compares the sum with a bound
        # taken from the first pass: floating-point sums may differ in the last bit
        # between two evaluations (the engine's summation order), and a unit at the
        # bound would be lost. WINDOW ranks the sums of one evaluation.
        top_n = TopN.WINDOW
    windowed = depth > 0 and top_n is TopN.WINDOW and summed
    source = _Source.CELLS if sets and depth and capabilities.list_merge else _Source.ROWS
    if not info.one_row_per_unit or windowed:
        source = _Source.UNITS
    projections: list[exp.Expr] = []
    key_slots = []
    for key in shape.group_by:
        key_slots.append(len(projections))
        projections.append(_column(key))

    unit_slot_of: dict[str | None, int] = {}
    unit_slots = []
    for aggregate in shape.aggregates:
        counted = aggregate.column
        if counted not in unit_slot_of:
            unit_slot_of[counted] = len(projections)
            projections.append(
                exp.alias_(_units(counted, source), f"__units_{len(unit_slot_of)}", quoted=True)
            )
        unit_slots.append(unit_slot_of[counted])

    value_slots = []
    for i, aggregate in enumerate(shape.aggregates):
        value_slots.append(len(projections))
        value = _aggregate(aggregate) if source is _Source.ROWS else _from_partials(aggregate)
        projections.append(exp.alias_(value, f"__value_{i}", quoted=True))

    top_slots, magnitude_slots, bounded = _contributions(shape, source, depth, projections, top_n)

    grouping_slot = None
    if sets:
        grouping_slot = len(projections)
        # the per-unit partials carry the grouping id of their set; otherwise the
        # outer GROUP BY GROUPING SETS computes it
        projections.append(_column(_GID) if source is _Source.UNITS else _grouping_id(shape, capabilities))

    table: exp.Expr = exp.to_table(shape.table, quoted=True)
    condition = _where(shape.predicates)
    # MAX_JOIN's contributions, read again by its second pass
    contributions: exp.Query | None = None
    shared: list[tuple[str, exp.Query]] = []
    if source is not _Source.ROWS:
        partials = _partials(shape, source, sets, depth, condition, capabilities, unit=bool(bounded))
        if windowed:
            cell = ([_GID] if sets else []) + list(shape.group_by)
            partials = ranked(partials, cell, [f"__s_{c}" for c in _summed(shape)])
        table = partials.subquery("__cells")
        if bounded:
            # both passes read the partials: a CTE read twice, which PostgreSQL computes
            # once (Spark computes it for each)
            shared.append(("__units", partials))
            table = exp.to_table("__units").as_("__cells")
            contributions = exp.select(exp.Star()).from_("__units")
        condition = None
    elif bounded:  # one row per unit: the rows are the contributions
        rows = exp.select(*(_column(c) for c in (*shape.group_by, *_summed(shape)))).from_(table)
        if condition is not None:
            rows = rows.where(condition)
        contributions = rows
        if sets:  # a contribution to one cell of each set
            listed = [(s, shape.grouping_id(s)) for s in sets]
            contributions = per_set(rows, shape.group_by, listed, _GID)
    # every part below is built for this query alone: attached as it is (sqlglot's builders
    # copy the whole query at each step by default: a third of a one-cell plan's time)
    query = exp.select(*projections).from_(table, copy=False)
    if condition is not None:
        query = query.where(condition, copy=False)
    if shape.group_by:
        keys = [_column(k) for k in shape.group_by]
        if not sets:
            query = query.group_by(*keys, copy=False)
        elif source is _Source.UNITS:  # a plain GROUP BY on the partials' grouping id
            query = query.group_by(_column(_GID), *keys, copy=False)
        else:
            query = query.group_by(_grouping_sets(sets), copy=False)
    if bounded and contributions is not None:
        key_types = {k: info.types.get(k.lower()) for k in shape.group_by}
        query = max_join(query, contributions, key_types, bounded, depth, _GID if sets else None, shared)
    if shape.group_by:
        # rows leave the engine in group-key order (public values only): the engine's own
        # order is arbitrary, and sorting here is far cheaper than in Python
        order = [exp.Ordered(this=_column(k), nulls_first=False) for k in shape.group_by]
        if sets:  # a total and a NULL key value of the same detail cell
            order.append(exp.Ordered(this=_column(_GID)))
        query = query.order_by(*order, copy=False)
    return Plan(
        query,
        tuple(key_slots),
        tuple(value_slots),
        tuple(unit_slots),
        grouping_slot=grouping_slot,
        top_slots=top_slots,
        magnitude_slots=magnitude_slots,
    )


def _exact_sums(shape: QueryShape, info: TableInfo) -> bool:
    """Every SUM/AVG column has an exact sum in the engine (integers, decimals)."""
    types = [(info.types.get(c.lower()) or "").upper() for c in _summed(shape)]
    return all(t.split("(")[0] in NUMERIC_TYPES and t not in ("FLOAT", "DOUBLE") for t in types)


def _summed(shape: QueryShape) -> list[str]:
    """The columns some SUM/AVG of ``shape`` reads, each once, sorted."""
    return sorted(
        {a.column for a in shape.aggregates if a.func is not AggFunc.COUNT and a.column is not None}
    )


def _contributions(
    shape: QueryShape, source: _Source, depth: int, projections: list[exp.Expr], top_n: TopN
) -> tuple[tuple[int | None, ...], tuple[int | None, ...], list[Top]]:
    """Append, per SUM/AVG column, the top-``depth`` magnitudes and their total;
    return their slots per aggregate (aggregates over one column share them), and with
    MAX_JOIN at depth >= 2 the lists whose slot holds their bound meanwhile."""
    slots: dict[str, tuple[int, int]] = {}
    bounded: list[Top] = []
    tops: list[int | None] = []
    magnitudes: list[int | None] = []
    for aggregate in shape.aggregates:
        column = aggregate.column
        if depth == 0 or aggregate.func is AggFunc.COUNT or column is None:
            tops.append(None)
            magnitudes.append(None)
            continue
        if column not in slots:
            n = len(slots) + 1
            slots[column] = (len(projections), len(projections) + 1)
            top: exp.Expr
            total: exp.Expr
            name = f"__top_{n}"
            # per unit, a contribution is the unit's sum inside the cell (its partial);
            # with one row per unit it is the row's value
            value = f"__s_{column}" if source is _Source.UNITS else column
            if source is _Source.CELLS:  # merge the detail cells' lists and totals
                top, total = _merged_top(f"__t_{column}", depth), exp.Sum(this=_column(f"__m_{column}"))
            elif top_n is TopN.WINDOW:
                top, total = ranked_top(value, depth), exp.Sum(this=exp.Abs(this=_column(value)))
            elif top_n is TopN.MAX_JOIN and depth > 1:
                # the slot holds the bound until max_join puts the list there
                top, total = bound(value, "_uid", depth), exp.Sum(this=exp.Abs(this=_column(value)))
                bounded.append(Top(name, f"__bound_{n}", value))
                name = bounded[-1].bound
            elif top_n is TopN.MAX_JOIN:  # the largest is the maximum
                top = exp.Array(expressions=[exp.Max(this=exp.Abs(this=_column(value)))])
                total = exp.Sum(this=exp.Abs(this=_column(value)))
            else:
                top, total = _top(_column(value), depth)
            projections.append(exp.alias_(top, name, quoted=True))
            projections.append(exp.alias_(total, f"__magnitude_{n}", quoted=True))
        tops.append(slots[column][0])
        magnitudes.append(slots[column][1])
    return tuple(tops), tuple(magnitudes), bounded


def _top(value: exp.Expr, depth: int) -> tuple[exp.Expr, exp.Expr]:
    """max(|x|, n), DuckDB's top-n aggregate (a descending list, NULLs skipped), and Σ|x|."""
    magnitude = exp.Abs(this=value)
    return exp.Max(this=magnitude, count=exp.Literal.number(depth)), exp.Sum(this=magnitude.copy())


def _merged_top(column: str, depth: int) -> exp.Expr:
    """The top ``depth`` of the union of top-``depth`` lists (exact: the lists come from
    disjoint sets of units)."""
    merged = exp.Anonymous(
        this="flatten", expressions=[exp.Anonymous(this="list", expressions=[_column(column)])]
    )
    ordered = exp.Anonymous(this="list_sort", expressions=[merged, exp.Literal.string("DESC")])
    bounds = [exp.Literal.number(1), exp.Literal.number(depth)]
    return exp.Anonymous(this="list_slice", expressions=[ordered, *bounds])


def _partials(
    shape: QueryShape,
    source: _Source,
    sets: tuple[tuple[str, ...], ...],
    depth: int,
    condition: exp.Expr | None,
    capabilities: Capabilities = DUCKDB_CAPABILITIES,
    unit: bool = False,
) -> exp.Select:
    """The inner query: per row, a row count and per column its non-NULL count and sum.

    UNITS: one row per (cell, unit); with grouping sets one per (grouping set, cell,
    unit), with the set's grouping id; with ``unit``, the unit id ``_uid`` too. CELLS:
    one row per detail cell (every key), with per SUM/AVG column its top-``depth`` list
    and Σ|x| when ``depth`` > 0.
    """
    columns = sorted({a.column for a in shape.aggregates if a.column is not None})
    summed = set(_summed(shape))
    projections: list[exp.Expr] = [_column(k) for k in shape.group_by]
    if sets and source is _Source.UNITS:
        projections.append(_grouping_id(shape, capabilities))
    if unit:
        projections.append(_column("_uid"))
    projections.append(exp.alias_(exp.Count(this=exp.Star()), "__rows", quoted=True))
    for column in columns:
        projections.append(exp.alias_(exp.Count(this=_column(column)), f"__n_{column}", quoted=True))
        if column in summed:
            projections.append(exp.alias_(exp.Sum(this=_column(column)), f"__s_{column}", quoted=True))
            if source is _Source.CELLS and depth:
                top, total = _top(_column(column), depth)
                projections.append(exp.alias_(top, f"__t_{column}", quoted=True))
                projections.append(exp.alias_(total, f"__m_{column}", quoted=True))
    inner = exp.select(*projections).from_(exp.to_table(shape.table, quoted=True))
    if condition is not None:
        inner = inner.where(condition)
    keys = [_column(k) for k in shape.group_by]
    if source is _Source.CELLS:
        return inner.group_by(*keys)
    if sets:
        return inner.group_by(_grouping_sets(sets, "_uid"))
    return inner.group_by(*keys, _column("_uid"))


def _rows(column: str | None) -> exp.Expr:
    return exp.Count(this=exp.Star() if column is None else _column(column))


def _units(column: str | None, source: _Source) -> exp.Expr:
    """Distinct units in the query set of an aggregate over ``column`` (None: COUNT(*))."""
    if source is _Source.ROWS:
        return _rows(column)
    if source is _Source.CELLS:  # rows are units: the detail cells' row counts add up
        return exp.Sum(this=_column("__rows" if column is None else f"__n_{column}"))
    if column is None:
        return exp.Count(this=exp.Star())
    has_value = exp.GT(this=_column(f"__n_{column}"), expression=exp.Literal.number(0))
    return exp.Filter(this=exp.Count(this=exp.Star()), expression=exp.Where(this=has_value))


def _aggregate(aggregate: Aggregate) -> exp.Expr:
    if aggregate.column is None:
        return exp.Count(this=exp.Star())
    column = _column(aggregate.column)
    if aggregate.func is AggFunc.COUNT:
        return exp.Count(this=column)
    if aggregate.func is AggFunc.SUM:
        return exp.Sum(this=column)
    return exp.Avg(this=column)


def _from_partials(aggregate: Aggregate) -> exp.Expr:
    if aggregate.column is None:
        return exp.Sum(this=_column("__rows"))
    count = exp.Sum(this=_column(f"__n_{aggregate.column}"))
    if aggregate.func is AggFunc.COUNT:
        return count
    total = exp.Sum(this=_column(f"__s_{aggregate.column}"))
    if aggregate.func is AggFunc.SUM:
        return total
    as_double = exp.cast(total, exp.DataType.build("DOUBLE"))
    return exp.Div(this=as_double, expression=exp.Nullif(this=count, expression=exp.Literal.number(0)))
