"""The rules' verdicts on a table's finest cells, as the history audit reads them.

The history audit (``guard.history.sensitive``) protects every finest cell the policy's
rules would flag, whether or not anyone asked for it. :class:`guard.core.Guard` reads
the finest cells' sums through the ordinary cell path; this module judges them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from guard.cells import CellGrid
from guard.policy.model import Policy, Protection, Role, Table
from guard.protection.sensitivity import sensitive_rows
from guard.protection.sums import value_aggregates
from guard.query.front import read_query
from guard.query.shape import QueryShape

__all__ = ["FlaggedCells", "finest_flagged", "flagged_cells"]

#: per magnitude space: (key, total, protection levels) of each flagged finest cell, and
#: every finest cell's total
FlaggedCells = tuple[
    dict[str, list[tuple[tuple[Any, ...], float, tuple[float, float]]]],
    dict[str, dict[tuple[Any, ...], float]],
]


def finest_flagged(
    policy: Policy,
    table: Table,
    column_types: Callable[[str], Mapping[str, str]],
    cells: Callable[[QueryShape], tuple[QueryShape, CellGrid]],
) -> tuple[QueryShape, *FlaggedCells] | None:
    """The finest cells of ``table`` (grouped by every dimension, with the SUM of every
    measure) that the policy's rules flag, per magnitude space, and every finest cell's
    total, with the shape that grouped them (None without rules or measures): the
    history audit's ``FinestSensitivity``. ``cells(shape)`` reads a shape's cells
    (stages 4-5)."""
    measures = table.names(Role.MEASURE)
    if not policy.protection.rules or not measures:
        return None
    dimensions = ", ".join(f'"{d}"' for d in table.names(Role.DIMENSION))
    sums = ", ".join(f'SUM("{m}")' for m in measures)
    grouped = f" GROUP BY {dimensions}" if dimensions else ""
    select = f"{dimensions}, {sums}" if dimensions else sums
    front = read_query(f'SELECT {select} FROM "{table.name}"{grouped}', policy, None, column_types)
    flagged, every = flagged_cells(*cells(front.shape), policy.protection)
    return front.shape, flagged, every


def flagged_cells(shape: QueryShape, grid: CellGrid, protection: Protection) -> FlaggedCells:
    """The cells of ``grid`` (a table grouped by every dimension, with the SUM of every
    measure: ``shape``) that the rules flag, per magnitude space, and every cell's total
    in those spaces."""
    values = {
        space: [row[index] for row in grid.cells] for space, (index, _) in value_aggregates(shape).items()
    }
    flagged = sensitive_rows(values, protection)
    every = {
        space: {grid.keys[r]: _number(values[space][r].value) for r in range(len(grid.keys))}
        for space in flagged
    }
    listed = {
        space: [(grid.keys[r], _number(values[space][r].value), level) for r, level in rows]
        for space, rows in flagged.items()
    }
    return listed, every


def _number(value: Any) -> float:
    """A cell's total as a float (an empty cell's NULL as 0; DECIMAL sums too)."""
    if value is None or isinstance(value, bool):
        return 0.0
    return float(value) if isinstance(value, int | float | Decimal) else 0.0
