"""Stage 5 for noise mode: one backend query returning each cell's bounded statistics.

Differential privacy needs the sensitivity the policy declares, not the one the data
happens to have, so every privacy unit's reach is bounded in the engine before anything
is added up (contribution bounding):

- each value is clamped into the measure's declared bounds [L, U];
- per cell, a unit counts for at most m = ``rows_per_cell`` rows; a unit with n > m
  rows in the cell contributes m times its mean clamped value (so its count and sum stay
  consistent: its share of a centred sum stays within m·(U - L)/2);
- per grouping level, a unit reaches at most c = ``cells_per_unit`` cells; which ones it
  keeps is a keyed hash of (unit, cell), fixed for the unit and unknowable to analysts.

With one row per unit (checked when the snapshot is built) every bound already holds,
and the query is a plain GROUP BY with clamped values: as fast as the raw query.

A cell's statistics (``Statistic``): ``units`` (distinct units), ``count`` of rows
(``column`` None) or of non-NULL values, ``sum`` of clamped values. Centred and shifted
sums for averages are derived from ``sum`` and ``count`` by the caller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp

from guard.backends.base import DUCKDB_CAPABILITIES, Capabilities, KeyedHash, TableInfo
from guard.plan.sql import GID as _GID
from guard.plan.sql import column as _column
from guard.plan.sql import distinct_sets as _distinct_sets
from guard.plan.sql import grouping_id as _grouping_id
from guard.plan.sql import grouping_sets as _grouping_sets
from guard.plan.sql import where as _where
from guard.query.shape import QueryShape

__all__ = ["NoisyPlan", "Statistic", "noisy_rewrite"]


@dataclass(frozen=True)
class Statistic:
    """One bounded statistic of a cell."""

    #: "units", "count" or "sum"
    kind: str
    #: the column counted or summed; None for units and COUNT(*)
    column: str | None = None

    @property
    def label(self) -> str:
        return f"{self.kind}({self.column or '*'})"


@dataclass(frozen=True)
class NoisyPlan:
    """The query and where each piece of a cell sits in its rows (ordered by group keys,
    NULLS LAST, then grouping id)."""

    query: exp.Select
    key_slots: tuple[int, ...]
    #: result column of each statistic (numbers; NULL for a sum without values)
    slots: Mapping[Statistic, int]
    #: as :attr:`guard.plan.rewrite.Plan.grouping_slot`
    grouping_slot: int | None = None


def noisy_rewrite(
    shape: QueryShape,
    info: TableInfo,
    statistics: Sequence[Statistic],
    bounds: Mapping[str, tuple[float, float]],
    *,
    cells_per_unit: int,
    rows_per_cell: int,
    salt: int,
    capabilities: Capabilities = DUCKDB_CAPABILITIES,
) -> NoisyPlan:
    """The bounded-statistics query for ``shape``'s cells.

    ``bounds`` maps each summed column to its declared [L, U]; ``salt`` keys the hash
    that picks a unit's cells when it reaches more than ``cells_per_unit``.

    Raises:
        ValueError: a summed column has no bounds, or a contribution bound is below 1.
    """
    if cells_per_unit < 1 or rows_per_cell < 1:
        raise ValueError("contribution bounds must be >= 1")
    for statistic in statistics:
        if statistic.kind == "sum" and (statistic.column is None or statistic.column not in bounds):
            raise ValueError(f"{statistic.label} needs the column's declared bounds")
    sets = _distinct_sets(shape)
    if info.one_row_per_unit:
        projections = _direct(statistics, bounds)
        source: exp.Expr = exp.to_table(shape.table, quoted=True)
        condition = _where(shape.predicates)
    else:
        projections = _bounded(statistics, rows_per_cell)
        source = _per_unit(shape, statistics, bounds, sets, salt, capabilities).subquery("__units")
        condition = exp.LTE(this=_column("__rank"), expression=exp.Literal.number(cells_per_unit))
    keys = [_column(k) for k in shape.group_by]
    selected: list[exp.Expr] = [*keys, *(expr for _, expr in projections)]
    grouping_slot = None
    if sets:
        grouping_slot = len(selected)
        selected.append(_column(_GID) if not info.one_row_per_unit else _grouping_id(shape, capabilities))
    query = exp.select(*selected).from_(source)
    if condition is not None:
        query = query.where(condition)
    if keys:
        if not sets:
            query = query.group_by(*[k.copy() for k in keys])
        elif not info.one_row_per_unit:
            query = query.group_by(_column(_GID), *[k.copy() for k in keys])
        else:
            query = query.group_by(_grouping_sets(sets))
        order = [exp.Ordered(this=k.copy(), nulls_first=False) for k in keys]
        if sets:
            order.append(exp.Ordered(this=_column(_GID)))
        query = query.order_by(*order)
    first = len(keys)
    slots = {statistic: first + i for i, (statistic, _) in enumerate(projections)}
    return NoisyPlan(query, tuple(range(len(keys))), slots, grouping_slot)


def _clamped(column: str, bounds: tuple[float, float]) -> exp.Expr:
    low, high = (exp.Literal.number(repr(b)) for b in bounds)
    as_double = exp.cast(_column(column), exp.DataType.build("DOUBLE"))
    return exp.Least(this=exp.Greatest(this=as_double, expressions=[low]), expressions=[high])


def _direct(
    statistics: Sequence[Statistic], bounds: Mapping[str, tuple[float, float]]
) -> list[tuple[Statistic, exp.Expr]]:
    """One row per unit: every bound holds already; only values need clamping."""
    projections: list[tuple[Statistic, exp.Expr]] = []
    for i, statistic in enumerate(statistics):
        expr: exp.Expr
        if statistic.kind == "sum":
            assert statistic.column is not None
            expr = exp.Sum(this=_clamped(statistic.column, bounds[statistic.column]))
        elif statistic.kind == "count" and statistic.column is not None:
            expr = exp.Count(this=_column(statistic.column))
        else:
            expr = exp.Count(this=exp.Star())
        projections.append((statistic, exp.alias_(expr, f"__stat_{i}", quoted=True)))
    return projections


def _per_unit(
    shape: QueryShape,
    statistics: Sequence[Statistic],
    bounds: Mapping[str, tuple[float, float]],
    sets: tuple[tuple[str, ...], ...],
    salt: int,
    capabilities: Capabilities,
) -> exp.Select:
    """One row per (grouping set, cell, unit): the unit's row counts and clamped sums in
    the cell, and the rank of the cell among the unit's cells of that level."""
    keys = [_column(k) for k in shape.group_by]
    projections: list[exp.Expr] = [*keys, _column("_uid"), _column("_ukey")]
    if sets:
        projections.append(_grouping_id(shape, capabilities))
    projections.append(exp.alias_(exp.Count(this=exp.Star()), "__rows", quoted=True))
    columns = sorted({s.column for s in statistics if s.column is not None})
    summed = {s.column for s in statistics if s.kind == "sum"}
    for column in columns:
        projections.append(exp.alias_(exp.Count(this=_column(column)), f"__n_{column}", quoted=True))
        if column in summed:
            total = exp.Sum(this=_clamped(column, bounds[column]))
            projections.append(exp.alias_(total, f"__s_{column}", quoted=True))
    partials = exp.select(*projections).from_(exp.to_table(shape.table, quoted=True))
    condition = _where(shape.predicates)
    if condition is not None:
        partials = partials.where(condition)
    # _ukey is a function of _uid: grouping by both keeps it without an aggregate
    if sets:
        partials = partials.group_by(_grouping_sets(sets, "_uid", "_ukey"))
    else:
        partials = partials.group_by(*[k.copy() for k in keys], _column("_uid"), _column("_ukey"))
    # which of a unit's cells survive the L0 bound: a keyed hash of the unit's own id and
    # the cell, so the choice never depends on which other units exist
    hashed = _keyed_hash(capabilities.keyed_hash, [exp.Literal.number(salt), _column("_ukey"), *keys])
    partition = [_column("_uid")] + ([_column(_GID)] if sets else [])
    rank = exp.Window(
        this=exp.RowNumber(),
        partition_by=partition,
        order=exp.Order(expressions=[exp.Ordered(this=hashed)]),
    )
    ranked = exp.select(exp.Star(), exp.alias_(rank, "__rank", quoted=True)).from_(
        partials.subquery("__partials")
    )
    return ranked


def _keyed_hash(kind: KeyedHash, parts: Sequence[exp.Expr]) -> exp.Expr:
    copies = [p.copy() for p in parts]
    if kind is KeyedHash.TEXT:
        joined = exp.Anonymous(this="concat_ws", expressions=[exp.Literal.string("|"), *copies])
        return exp.Anonymous(this="hashtextextended", expressions=[joined, exp.Literal.number(0)])
    return exp.Anonymous(this=kind.value, expressions=copies)


def _bounded(statistics: Sequence[Statistic], rows_per_cell: int) -> list[tuple[Statistic, exp.Expr]]:
    """Sum the per-unit partials, each unit's row count capped at m (and its sum scaled
    to the capped count)."""
    m = exp.Literal.number(rows_per_cell)
    projections: list[tuple[Statistic, exp.Expr]] = []
    for i, statistic in enumerate(statistics):
        expr: exp.Expr
        if statistic.kind == "units":
            expr = exp.Count(this=exp.Star())
        elif statistic.kind == "count":
            rows = _column("__rows" if statistic.column is None else f"__n_{statistic.column}")
            # a count over no unit is 0, not NULL
            expr = exp.Coalesce(
                this=exp.Sum(this=exp.Least(this=rows, expressions=[m.copy()])),
                expressions=[exp.Literal.number(0)],
            )
        else:
            n = _column(f"__n_{statistic.column}")
            kept = exp.Least(this=n.copy(), expressions=[m.copy()])
            share = exp.Div(this=kept, expression=exp.Nullif(this=n, expression=exp.Literal.number(0)))
            expr = exp.Sum(this=exp.Mul(this=_column(f"__s_{statistic.column}"), expression=share))
        projections.append((statistic, exp.alias_(expr, f"__stat_{i}", quoted=True)))
    return projections
