"""The cells of one answer, as the protection stage sees them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from guard.backends.base import ResultSet, TableInfo
from guard.query.rewrite import Plan
from guard.query.shape import QueryShape

__all__ = ["Cell", "CellGrid", "Flag", "Suppression", "cells_from_result"]


class Flag(Enum):
    RELEASED = "released"
    SUPPRESSED = "suppressed"
    NOISED = "noised"
    ROUNDED = "rounded"


@dataclass(frozen=True)
class Cell:
    """One aggregate value of one group, with the public size of its query set."""

    value: Any
    #: distinct privacy units in the cell's query set
    units: int
    #: N: distinct privacy units the complement is taken in (the whole table)
    population: int


@dataclass(frozen=True)
class CellGrid:
    """Rows (groups) by aggregates. ``keys[r]`` are the group's dimension values."""

    keys: tuple[tuple[Any, ...], ...]
    cells: tuple[tuple[Cell, ...], ...]


@dataclass(frozen=True)
class Suppression:
    """A cell withheld, and the control that withheld it (never the hidden value)."""

    row: int
    aggregate: int
    control: str


def cells_from_result(shape: QueryShape, plan: Plan, result: ResultSet, info: TableInfo) -> CellGrid:
    populations = [info.population(a.column) for a in shape.aggregates]
    keys = []
    cells = []
    for row in result.rows:
        keys.append(tuple(row[slot] for slot in plan.key_slots))
        cells.append(
            tuple(
                Cell(value=row[v], units=int(row[u] or 0), population=n)
                for v, u, n in zip(plan.value_slots, plan.unit_slots, populations, strict=True)
            )
        )
    return CellGrid(tuple(keys), tuple(cells))
