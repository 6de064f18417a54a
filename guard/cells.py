"""The cells of one answer, as the protection stage sees them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from guard.backends.base import ResultSet, TableInfo
from guard.plan.rewrite import Plan
from guard.query.shape import QueryShape

__all__ = ["Cell", "CellGrid", "cells_from_result"]


@dataclass(frozen=True)
class Cell:
    """One aggregate value of one group, with the public size of its query set."""

    value: Any
    #: distinct privacy units in the cell's query set
    units: int
    #: N: distinct privacy units the complement is taken in (the whole table)
    population: int
    #: SUM/AVG with a contribution depth: the largest per-unit magnitudes |x_u|,
    #: descending, at most ``depth`` of them (fewer when fewer units have a value);
    #: () when not computed (COUNT, depth 0)
    top: tuple[float, ...] = ()
    #: Σ_u |x_u| over the cell, in the measure's unit (0.0 for a cell without values);
    #: None when not computed
    magnitude: float | None = None


@dataclass(frozen=True)
class CellGrid:
    """Rows (groups) by aggregates. ``keys[r]`` are the group's dimension values.

    ``rolled_up[r][i]`` is True when key ``i`` of ``shape.group_by`` is a total in row
    ``r`` (its key value is then None); all False in the rows of a plain GROUP BY. It has
    one entry per row, or is ``()`` for a grid built without it (and for no rows).
    """

    keys: tuple[tuple[Any, ...], ...]
    cells: tuple[tuple[Cell, ...], ...]
    rolled_up: tuple[tuple[bool, ...], ...] = ()


def cells_from_result(shape: QueryShape, plan: Plan, result: ResultSet, info: TableInfo) -> CellGrid:
    """The grid of ``result``, the rows of ``plan.query`` for ``shape``.

    Engine numbers in the contribution slots (DECIMAL, HUGEINT, lists of them) become
    floats; the row order is the engine's (group keys, then grouping id).
    """
    populations = [info.population(a.column) for a in shape.aggregates]
    width = len(shape.aggregates)
    slots = list(
        zip(
            plan.value_slots,
            plan.unit_slots,
            populations,
            plan.top_slots or (None,) * width,
            plan.magnitude_slots or (None,) * width,
            strict=True,
        )
    )
    plain = all(t is None and m is None for *_, t, m in slots)
    detail = (False,) * len(shape.group_by)
    masks: dict[int, tuple[bool, ...]] = {}
    g = plan.grouping_slot
    keys = []
    cells = []
    rolled_up = []
    for row in result.rows:
        keys.append(tuple(row[slot] for slot in plan.key_slots))
        if g is None:
            rolled_up.append(detail)
        else:
            gid = int(row[g])
            if gid not in masks:
                masks[gid] = shape.rolled_up(gid)
            rolled_up.append(masks[gid])
        if plain:
            cells.append(tuple(Cell(row[v], int(row[u] or 0), n) for v, u, n, _, _ in slots))
            continue
        cells.append(
            tuple(
                Cell(
                    row[v],
                    int(row[u] or 0),
                    n,
                    top=() if t is None else _floats(row[t]),
                    magnitude=None if m is None else float(row[m] or 0),
                )
                for v, u, n, t, m in slots
            )
        )
    return CellGrid(tuple(keys), tuple(cells), tuple(rolled_up))


def _floats(values: Sequence[Any] | None) -> tuple[float, ...]:
    # a ranked top-n (engines without a top-n aggregate) holds NULL past a cell's last unit
    return () if values is None else tuple(float(v) for v in values if v is not None)
