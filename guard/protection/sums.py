"""The sums a cell query carries: an average is protected (and audited) as the sum on
its query set, so the cells of a shape with an AVG also hold that SUM, never released
itself (the outputs do not name it)."""

from __future__ import annotations

from dataclasses import replace

from guard.protection.keys import space_of
from guard.query.shape import AggFunc, Aggregate, QueryShape

__all__ = ["value_aggregates", "with_sums"]


def value_aggregates(shape: QueryShape) -> dict[str, tuple[int, list[int]]]:
    """Per space: the aggregate whose value the space's table holds, and every
    aggregate of the space (an AVG follows its space's SUM)."""
    spaces: dict[str, tuple[int, list[int]]] = {}
    for i, aggregate in enumerate(shape.aggregates):
        space = space_of(aggregate)
        holder, members = spaces.get(space, (-1, []))
        if holder < 0 and aggregate.func is not AggFunc.AVG:
            holder = i
        spaces[space] = (holder, [*members, i])
    for space, (holder, _) in spaces.items():
        if holder < 0:
            raise ValueError(f"the cell query has no SUM for {space}; add it with with_sums()")
    return spaces


def with_sums(shape: QueryShape) -> QueryShape:
    """``shape`` with a SUM(col) appended for every AVG(col) without one: the sum
    space's table holds sums (never released themselves: outputs do not name them)."""
    have = {space_of(a) for a in shape.aggregates if a.func is not AggFunc.AVG}
    extra: list[Aggregate] = []
    for aggregate in shape.aggregates:
        space = space_of(aggregate)
        if space not in have:
            have.add(space)
            extra.append(Aggregate(AggFunc.SUM, aggregate.column))
    return replace(shape, aggregates=(*shape.aggregates, *extra)) if extra else shape
