"""Top-n contributions in standard SQL: the WINDOW and MAX_JOIN templates.

For engines without a top-n aggregate (PostgreSQL, Spark), per cell and SUM/AVG column
the ``depth`` largest magnitudes a_u = |x_u| (x_u: a unit's contribution to the cell).
The contributions are one row per (cell, unit): the per-unit partials, or, with
MAX_JOIN and one row per unit, the table's rows themselves.

WINDOW (:func:`ranked`, :func:`ranked_top`): every contribution is ranked with
``row_number()`` over its cell, and the first ``depth`` ranks kept.

MAX_JOIN (:func:`bound`, :func:`max_join`), two passes over the contributions:

1. the cell query itself also takes, per cell, a lower bound b of the ``depth``-th
   largest a_u: the contributions are split into ``depth`` disjoint buckets by unit
   (``_uid`` modulo ``depth``), and b is the smallest of the buckets' maxima. These are
   the magnitudes of ``depth`` different units, so at least ``depth`` units reach b, and
   every unit in the top ``depth`` (ties included) has a_u >= b. A cell with an empty
   bucket (few units) gets no bound (NULL): all its units are candidates;
2. the contributions are joined with their cell's row (bound included) and only the
   candidates (a_u >= b for some column) kept, usually a handful per cell; they alone
   are ranked as in WINDOW, and the cells' rows grouped back from them.

No per-unit GROUP BY when each unit has one row, and no sort or window over all of
them: the cost is two scans (with grouping sets, one more per set: :func:`per_set`)
and one hash join with the (small) cell result. A cell whose units mostly tie at the
top keeps them all as candidates, as WINDOW would rank them all. The join matches
cells NULL-safely with hashable equalities (:func:`same_cell`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp

from guard.engines import NUMERIC_TYPES

__all__ = ["Top", "bound", "max_join", "per_set", "ranked", "ranked_top", "same_cell"]

#: the per-cell result of pass 1 (a CTE, read by pass 2's join)
_CELLS = "__cell_query"
_UNITS = "__u"
_LEVEL = "__l"


def _column(name: str, table: str | None = None) -> exp.Column:
    return exp.column(name, table=table, quoted=True)


def _magnitude(value: str, table: str | None = None) -> exp.Expr:
    return exp.Abs(this=_column(value, table))


# --- WINDOW ----------------------------------------------------------------------------


def _rank(value: str) -> str:
    return f"__r_{value}"


def ranked(contributions: exp.Query, cell: Sequence[str], values: Sequence[str]) -> exp.Select:
    """The contributions with, per column of ``values`` (holding x_u), each unit's rank
    by |x_u| inside its cell (``cell``: the columns telling cells apart; 1 = largest,
    units without a value last): row_number() breaks ties, so equal contributions each
    keep a rank, as in a top-n list."""
    ranks: list[exp.Expr] = []
    for value in values:
        order = exp.Ordered(this=_magnitude(value), desc=True, nulls_first=False)
        window = exp.Window(
            this=exp.RowNumber(),
            partition_by=[_column(c) for c in cell] or None,
            order=exp.Order(expressions=[order]),
        )
        ranks.append(exp.alias_(window, _rank(value), quoted=True))
    return exp.select(exp.Star(), *ranks).from_(contributions.subquery("__partials"))


def ranked_top(value: str, depth: int) -> exp.Expr:
    """[a_1, ..., a_depth] from the ranks of :func:`ranked`: NULL where a cell has fewer
    units. ``value`` holds x_u."""
    entries: list[exp.Expr] = []
    for rank in range(1, depth + 1):
        hit = exp.EQ(this=_column(_rank(value)), expression=exp.Literal.number(rank))
        # an explicit ELSE NULL: Spark's if() takes three arguments
        entries.append(exp.Max(this=exp.If(this=hit, true=_magnitude(value), false=exp.null())))
    return exp.Array(expressions=entries)


# --- MAX_JOIN --------------------------------------------------------------------------


@dataclass(frozen=True)
class Top:
    """One top-n list of the cell query: its result column, the column of pass 1 that
    holds its bound meanwhile, and the contributions' column holding x_u."""

    column: str
    bound: str
    value: str


def bound(value: str, unit: str, depth: int) -> exp.Expr:
    """Pass 1, an aggregate over the contributions: the smallest of ``depth`` bucket
    maxima of |x_u| (``value`` holds x_u, ``unit`` the unit id), NULL if a bucket has no
    value. ``depth`` >= 1."""
    maxima = []
    for bucket in range(depth):
        mod = exp.Mod(this=_column(unit), expression=exp.Literal.number(depth))
        where = exp.Where(this=exp.EQ(this=exp.Paren(this=mod), expression=exp.Literal.number(bucket)))
        maxima.append(exp.Filter(this=exp.Max(this=_magnitude(value)), expression=where))
    if depth == 1:
        return maxima[0]
    # LEAST skips NULLs (PostgreSQL, Spark): an empty bucket must void the bound instead
    empty = exp.or_(*(exp.Is(this=m.copy(), expression=exp.null()) for m in maxima))
    least = exp.Least(this=maxima[0], expressions=maxima[1:])
    return exp.Case().when(empty, exp.null()).else_(least)


def max_join(
    cells: exp.Select,
    contributions: exp.Query,
    keys: Mapping[str, str | None],
    tops: Sequence[Top],
    depth: int,
    grouping_id: str | None = None,
    before: Sequence[tuple[str, exp.Query]] = (),
) -> exp.Select:
    """Pass 2: ``cells`` (the cell query, grouped, unordered; each ``Top.bound`` column
    holds a :func:`bound`) with each bound replaced by its top-``depth`` list, taken
    from the ``contributions`` that reach a bound.

    ``contributions`` are one row per cell and unit, with the group ``keys`` (mapped to
    their types, the guard's names; None: unknown) and, with grouping sets, the
    ``grouping_id`` column that tells the sets apart (see :func:`per_set`). The result
    has the columns of ``cells``, in order, one row per cell (order it by their names).
    ``before``: CTEs (name, query) that ``cells`` and ``contributions`` may read.

    The candidates carry their cell's columns, and the result is grouped from them: a
    cell always has a candidate (at least ``depth`` units reach its bound, or it has none
    and all its units are candidates), and ``cells`` is read by one join only, which
    Spark, inlining the CTE, would otherwise compute twice.
    """
    columns = list(cells.named_selects)
    cell = [*keys, *([grouping_id] if grouping_id is not None else [])]
    values = sorted({t.value for t in tops})
    candidates = _candidates(contributions, columns, values, tops, keys, grouping_id)
    by_bound = {t.bound: t for t in tops}
    projections: list[exp.Expr] = []
    for name in columns:
        top = by_bound.get(name)
        if name in cell:
            projections.append(_column(name))
        elif top is not None:
            projections.append(exp.alias_(ranked_top(_candidate(top.value), depth), top.column, quoted=True))
        else:  # constant in the cell
            projections.append(exp.alias_(exp.Max(this=_column(name)), name, quoted=True))
    ranks = ranked(candidates, cell, [_candidate(v) for v in values])
    per_cell = exp.select(*projections).from_(ranks.subquery("__ranked"))
    if cell:
        per_cell = per_cell.group_by(*(_column(c) for c in cell))
    for name, query in before:
        per_cell = per_cell.with_(name, as_=query)
    return per_cell.with_(_CELLS, as_=cells)


def _candidate(value: str) -> str:
    """A contribution's column among its cell's columns."""
    return f"__x_{value}"


def _candidates(
    contributions: exp.Query,
    columns: Sequence[str],
    values: Sequence[str],
    tops: Sequence[Top],
    keys: Mapping[str, str | None],
    grouping_id: str | None,
) -> exp.Select:
    """The contributions that reach a bound, joined with their cell of the cell query (on
    ``keys`` and ``grouping_id``): the cell's ``columns`` and the contributions'
    ``values``."""
    projections: list[exp.Expr] = [_column(c, _LEVEL) for c in columns]
    projections += [exp.alias_(_column(v, _UNITS), _candidate(v), quoted=True) for v in values]
    select = exp.select(*projections).from_(contributions.subquery(_UNITS))
    select = _join(select, _UNITS, exp.to_table(_CELLS).as_(_LEVEL), _LEVEL, keys, grouping_id)
    reached = exp.or_(
        *(
            exp.or_(
                exp.GTE(this=_magnitude(t.value, _UNITS), expression=_column(t.bound, _LEVEL)),
                exp.Is(this=_column(t.bound, _LEVEL), expression=exp.null()),
            )
            for t in tops
        )
    )
    return select.where(reached)


def per_set(
    rows: exp.Select, keys: Sequence[str], sets: Sequence[tuple[Sequence[str], int]], grouping_id: str
) -> exp.Query:
    """``rows`` (one per unit, with the group ``keys``) as contributions to one cell of
    each grouping set (``sets``: each set's keys and grouping id): per row and set, the
    keys the set rolls up NULL, and the set's grouping id in column ``grouping_id``.

    A UNION ALL of one SELECT per set (the rows are read once per set, never grouped
    by unit), so that the cells are then matched by one equi-join, as the per-unit
    partials of grouping sets are. A join with a list of the sets (VALUES) instead
    leaves PostgreSQL free to join the list with the cells first and then compare
    every row with every cell (16 s instead of 1.2 s on a 1M-row ROLLUP).
    """
    selects = []
    for kept, gid in sets:
        projections: list[exp.Expr] = []
        for key in keys:
            # rolled up: a NULL of the key's type (a bare NULL has none where every set
            # rolls the key up)
            value = _column(key) if key in kept else exp.Case().when(exp.false(), _column(key))
            projections.append(exp.alias_(value, key, quoted=True))
        projections.append(exp.alias_(exp.Literal.number(gid), grouping_id, quoted=True))
        projections += [_column(c) for c in rows.named_selects if c not in keys]
        selects.append(exp.select(*projections).from_(rows.subquery(_UNITS)))
    union: exp.Query = selects[0]
    for select in selects[1:]:
        union = exp.union(union, select, distinct=False)
    return union


def _join(
    select: exp.Select,
    left: str,
    other: exp.Expr,
    right: str,
    keys: Mapping[str, str | None],
    grouping_id: str | None,
) -> exp.Select:
    """``select`` (FROM ``left``) joined with ``other`` (named ``right``) on the cell: a
    cross join of the one cell of a query without GROUP BY (``other`` has one row)."""
    conditions = [c for key, guard_type in keys.items() for c in same_cell(key, guard_type, left, right)]
    if grouping_id is not None:  # never NULL; tells a rolled-up key from a NULL value
        conditions.append(exp.EQ(this=_column(grouping_id, left), expression=_column(grouping_id, right)))
    if not conditions:
        return select.join(other, join_type="cross")
    return select.join(other, on=exp.and_(*conditions), join_type="inner")


def _stand_in(guard_type: str | None) -> exp.Expr | None:
    """A constant of a key's type (the guard's DuckDB type name) that stands in for
    NULL in a join key; None for a type without one here."""
    name = (guard_type or "").upper().split("(")[0]
    if name in NUMERIC_TYPES:
        return exp.Literal.number(0)
    if name == "VARCHAR":
        return exp.Literal.string("")
    if name == "BOOLEAN":
        return exp.false()
    if name == "DATE":
        return exp.cast(exp.Literal.string("2000-01-01"), exp.DataType.build("DATE"))
    return None


def same_cell(key: str, guard_type: str | None, left: str, right: str) -> list[exp.Expr]:
    """Conditions: ``key`` of tables ``left`` and ``right`` is equal or NULL in both (a
    NULL key value, or a key rolled up by a grouping set).

    Spelled as two equalities, (k IS NULL) and COALESCE(k, c) with a constant c of the
    key's type (c may be a real value too: the first equality tells them apart),
    because PostgreSQL cannot hash or merge-join on IS NOT DISTINCT FROM and would
    compare every contribution with every cell (70x slower than WINDOW at 300 cells).
    IS NOT DISTINCT FROM is kept for key types without a constant here.
    """
    a, b = _column(key, left), _column(key, right)
    stand_in = _stand_in(guard_type)
    if stand_in is None:
        return [exp.NullSafeEQ(this=a, expression=b)]
    missing = [exp.Paren(this=exp.Is(this=c.copy(), expression=exp.null())) for c in (a, b)]
    filled = [exp.Coalesce(this=c.copy(), expressions=[stand_in.copy()]) for c in (a, b)]
    return [exp.EQ(this=missing[0], expression=missing[1]), exp.EQ(this=filled[0], expression=filled[1])]
