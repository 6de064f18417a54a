"""Stage 5: one backend query that returns, per cell, what every control needs.

For each group the query returns the group keys, each requested aggregate, and for each
aggregate the number of distinct privacy units in its query set (the rows it reads: all
selected rows for COUNT(*), those with a non-NULL value for COUNT/SUM/AVG of a column).
The query is built as a sqlglot tree, never by pasting the analyst's text, and is
generated in the engine's own dialect.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from guard.backends.base import TableInfo
from guard.query.shape import AggFunc, Aggregate, Predicate, PredOp, QueryShape

__all__ = ["Plan", "rewrite"]

_COMPARE: dict[PredOp, type[exp.Binary]] = {
    PredOp.NE: exp.NEQ,
    PredOp.LT: exp.LT,
    PredOp.LE: exp.LTE,
    PredOp.GT: exp.GT,
    PredOp.GE: exp.GTE,
}


@dataclass(frozen=True)
class Plan:
    """The backend query and where each piece of a cell sits in its result rows."""

    query: exp.Select
    #: result column positions of the group keys
    key_slots: tuple[int, ...]
    #: per aggregate of the shape: result column of its value
    value_slots: tuple[int, ...]
    #: per aggregate of the shape: result column of its query set's unit count
    unit_slots: tuple[int, ...]


def _column(name: str) -> exp.Column:
    return exp.column(name, quoted=True)


def rewrite(shape: QueryShape, info: TableInfo) -> Plan:
    """Build the cell query for ``shape`` over the table described by ``info``.

    With one row per privacy unit (checked when the snapshot was built) rows are units
    and plain counts suffice. Otherwise the query first sums each unit's rows inside
    each cell (GROUP BY keys, _uid), then aggregates those per-unit partials: counting
    units is then a plain count, much cheaper than COUNT(DISTINCT), and each unit's
    contribution to the cell is one number (what the sensitivity rules read).
    """
    per_unit = not info.one_row_per_unit
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
            count = _units_from_partials(counted) if per_unit else _rows(counted)
            projections.append(exp.alias_(count, f"__units_{len(unit_slot_of)}", quoted=True))
        unit_slots.append(unit_slot_of[counted])

    value_slots = []
    for i, aggregate in enumerate(shape.aggregates):
        value_slots.append(len(projections))
        value = _from_partials(aggregate) if per_unit else _aggregate(aggregate)
        projections.append(exp.alias_(value, f"__value_{i}", quoted=True))

    source: exp.Expr = exp.to_table(shape.table, quoted=True)
    condition = _where(shape.predicates)
    if per_unit:
        source = _partials(shape, condition).subquery("__cells")
        condition = None
    query = exp.select(*projections).from_(source)
    if condition is not None:
        query = query.where(condition)
    if shape.group_by:
        keys = [_column(k) for k in shape.group_by]
        # rows leave the engine in group-key order (public values only): the engine's own
        # order is arbitrary, and sorting here is far cheaper than in Python
        query = query.group_by(*keys).order_by(*(exp.Ordered(this=k.copy(), nulls_first=False) for k in keys))
    return Plan(query, tuple(key_slots), tuple(value_slots), tuple(unit_slots))


def _partials(shape: QueryShape, condition: exp.Expr | None) -> exp.Select:
    """One row per (cell, unit): the unit's row count, and per column its non-NULL
    count and sum."""
    columns = sorted({a.column for a in shape.aggregates if a.column is not None})
    summed = {a.column for a in shape.aggregates if a.func is not AggFunc.COUNT and a.column is not None}
    projections: list[exp.Expr] = [_column(k) for k in shape.group_by]
    projections.append(exp.alias_(exp.Count(this=exp.Star()), "__rows", quoted=True))
    for column in columns:
        projections.append(exp.alias_(exp.Count(this=_column(column)), f"__n_{column}", quoted=True))
        if column in summed:
            projections.append(exp.alias_(exp.Sum(this=_column(column)), f"__s_{column}", quoted=True))
    inner = exp.select(*projections).from_(exp.to_table(shape.table, quoted=True))
    if condition is not None:
        inner = inner.where(condition)
    return inner.group_by(*(_column(k) for k in shape.group_by), _column("_uid"))


def _rows(column: str | None) -> exp.Expr:
    return exp.Count(this=exp.Star() if column is None else _column(column))


def _units_from_partials(column: str | None) -> exp.Expr:
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


def _where(predicates: tuple[Predicate, ...]) -> exp.Expr | None:
    conditions = [_condition(p) for p in predicates]
    return exp.and_(*conditions) if conditions else None


def _condition(predicate: Predicate) -> exp.Expr:
    column = _column(predicate.column)
    values = [exp.convert(v) for v in predicate.values]
    if predicate.op is PredOp.IN:
        if len(values) == 1:
            return exp.EQ(this=column, expression=values[0])
        return exp.In(this=column, expressions=values)
    if predicate.op is PredOp.BETWEEN:
        return exp.Between(this=column, low=values[0], high=values[1])
    if predicate.op is PredOp.IS_NULL:
        return exp.Is(this=column, expression=exp.Null())
    if predicate.op is PredOp.IS_NOT_NULL:
        return exp.Not(this=exp.Is(this=column, expression=exp.Null()))
    return _COMPARE[predicate.op](this=column, expression=values[0])
