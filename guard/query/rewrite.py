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
    """Build the cell query for ``shape`` over the table described by ``info``."""
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
                exp.alias_(_unit_count(counted, info), f"__units_{len(unit_slot_of)}", quoted=True)
            )
        unit_slots.append(unit_slot_of[counted])

    value_slots = []
    for i, aggregate in enumerate(shape.aggregates):
        value_slots.append(len(projections))
        projections.append(exp.alias_(_aggregate(aggregate), f"__value_{i}", quoted=True))

    query = exp.select(*projections).from_(exp.to_table(shape.table, quoted=True))
    condition = _where(shape.predicates)
    if condition is not None:
        query = query.where(condition)
    if shape.group_by:
        query = query.group_by(*(_column(k) for k in shape.group_by))
    return Plan(query, tuple(key_slots), tuple(value_slots), tuple(unit_slots))


def _unit_count(column: str | None, info: TableInfo) -> exp.Expr:
    if info.one_row_per_unit:
        # one row per unit (checked when the snapshot was built): rows are units, and a
        # plain count is much cheaper than a distinct count
        return exp.Count(this=exp.Star() if column is None else _column(column))
    distinct = exp.Count(this=exp.Distinct(expressions=[_column("_uid")]))
    if column is None:
        return distinct
    return exp.Filter(
        this=distinct,
        expression=exp.Where(this=exp.Not(this=exp.Is(this=_column(column), expression=exp.Null()))),
    )


def _aggregate(aggregate: Aggregate) -> exp.Expr:
    if aggregate.column is None:
        return exp.Count(this=exp.Star())
    column = _column(aggregate.column)
    if aggregate.func is AggFunc.COUNT:
        return exp.Count(this=column)
    if aggregate.func is AggFunc.SUM:
        return exp.Sum(this=column)
    return exp.Avg(this=column)


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
