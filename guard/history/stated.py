"""What a released aggregate states to the history audit: the SUM over its query set
(an AVG states its cell's sum too, with the count, which is no secret), and the declared
per-row bounds of a ``sum(m)`` space's measure for the interval checks."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from guard.cells import Cell
from guard.policy.model import Role, Table
from guard.query.shape import AggFunc, QueryShape

__all__ = ["measure_bounds", "released_sum"]


def measure_bounds(table: Table, space: str) -> tuple[float, float] | None:
    """The declared per-row bounds of a ``sum(m)`` space's measure (counts: none)."""
    if not space.startswith("sum("):
        return None
    name = space[4:-1]
    for column in table.columns:
        if column.role is Role.MEASURE and column.name.lower() == name.lower():
            return column.bounds
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    return float(value) if isinstance(value, int | float | Decimal) else None


def released_sum(
    shape: QueryShape, measured: QueryShape | None, cells: Sequence[Cell], index: int, value: object
) -> float | None:
    """The SUM a released aggregate states: its value for a SUM; for an AVG the sum of
    its cell (the cell query carries it: ``measured`` is the shape of ``cells``); None for
    a COUNT."""
    aggregate = shape.aggregates[index]
    if aggregate.func is AggFunc.SUM:
        return _number(value)
    if aggregate.func is not AggFunc.AVG or measured is None:
        return None
    for j, other in enumerate(measured.aggregates):
        if other.func is AggFunc.SUM and other.column == aggregate.column and j < len(cells):
            return _number(cells[j].value)
    return None
