"""Stage 7: apply the cell controls and assemble the protected answer.

Controls are listed as data (``CONTROLS``); each is a pure function from the cell grid
and the policy's protection settings to the cells it withholds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from guard.cells import CellGrid, Flag, Suppression
from guard.controls import query_set_size as qss
from guard.errors import QueryRefused
from guard.policy.model import Protection
from guard.query.shape import OutputKind, QueryShape
from guard.result import ProtectedResult

__all__ = ["CONTROLS", "protect"]

Control = Callable[[CellGrid, Protection], list[Suppression]]


def _query_set_size(grid: CellGrid, protection: Protection) -> list[Suppression]:
    return qss.query_set_size(grid, protection.min_query_set_size, protection.allow_full_population)


CONTROLS: tuple[Control, ...] = (_query_set_size,)

_CONTROL_TEXT = {
    qss.NAME: "query-set-size control (each released cell needs at least k={k} respondents "
    "and at least {k} outside it)",
}


def protect(shape: QueryShape, grid: CellGrid, protection: Protection) -> ProtectedResult:
    """Withhold what the controls say, order and limit the rows, and explain.

    Raises:
        QueryRefused: the query has a single cell row and every aggregate in it fails.
    """
    withheld: dict[tuple[int, int], str] = {}
    for control in CONTROLS:
        for s in control(grid, protection):
            withheld.setdefault((s.row, s.aggregate), s.control)

    if not shape.group_by and grid.cells:
        row = grid.cells[0]
        if all((0, a) in withheld for a in range(len(row))):
            raise QueryRefused(
                qss.refusal_reason(row[0], protection.min_query_set_size, protection.allow_full_population)
            )

    released, suppressed = Flag.RELEASED.value, Flag.SUPPRESSED.value
    outputs = [(o.kind is OutputKind.KEY, o.index) for o in shape.outputs]
    rows: list[list[Any]] = []
    flags: list[list[str]] = []
    for r, keys in enumerate(grid.keys):
        cells = grid.cells[r]
        values: list[Any] = []
        row_flags: list[str] = []
        for is_key, index in outputs:
            if is_key:
                values.append(keys[index])
                row_flags.append(released)
            elif (r, index) in withheld:
                values.append(None)
                row_flags.append(suppressed)
            else:
                values.append(cells[index].value)
                row_flags.append(released)
        rows.append(values)
        flags.append(row_flags)

    order = _ordering(shape, rows)
    rows = [rows[i] for i in order]
    flags = [flags[i] for i in order]
    return ProtectedResult(
        columns=[o.name for o in shape.outputs],
        rows=rows,
        flags=flags,
        notes=_notes(withheld, grid, protection),
    )


def _ordering(shape: QueryShape, rows: list[list[Any]]) -> list[int]:
    """Row order computed on the protected values only: ordering by the hidden values
    would leak how withheld cells compare. Rows arrive in group-key order (sorted
    by the engine); ORDER BY re-sorts them stably."""
    order = list(range(len(rows)))  # the backend returns rows in group-key order
    for item in reversed(shape.order_by):
        nulls = [i for i in order if rows[i][item.output] is None]
        present = [i for i in order if rows[i][item.output] is not None]
        present.sort(key=lambda i: _sort_key(rows[i][item.output], False), reverse=item.descending)
        order = nulls + present if item.nulls_first else present + nulls
    start = shape.offset
    stop = None if shape.limit is None else start + shape.limit
    return order[start:stop]


def _sort_key(value: Any, nulls_first: bool) -> tuple[int, str, Any]:
    if value is None:
        return (0 if nulls_first else 2, "", 0)
    # values of one column share a type; the type name only separates NULL-like oddities
    return (1, "", value) if isinstance(value, int | float) else (1, type(value).__name__, value)


def _notes(withheld: dict[tuple[int, int], str], grid: CellGrid, protection: Protection) -> list[str]:
    if not withheld:
        return []
    total = sum(len(row) for row in grid.cells)
    by_control: dict[str, int] = {}
    for control in withheld.values():
        by_control[control] = by_control.get(control, 0) + 1
    notes = []
    for control, count in sorted(by_control.items()):
        text = _CONTROL_TEXT.get(control, control).format(k=protection.min_query_set_size)
        notes.append(f"{count} of {total} cells suppressed by the {text}")
    return notes
