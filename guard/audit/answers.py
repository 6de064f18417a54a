"""Which cells of a logged answer were published: matching answer rows to grouping cells.

The guard's own log keeps the rows it sent and a flag per value, so the offline audit
counts as released only what was: a suppressed value, a row cut by LIMIT or a withheld
cell is not. A row is matched to its cell by its group-key values and its grouping
level; the level is read from GROUPING() outputs, or else from which keys are NULL, among the
cells the replay found in the data (a NULL key is a rolled-up one unless the data has
NULLs there). An answer that cannot be matched (a grouping key not in the output, a
row fitting no cell or several) gives None: the caller then audits every cell as
released, which can only over-report.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from guard.audit.logsource import Answer
from guard.history.keys import CellKey, normalized
from guard.query.shape import OutputKind, QueryShape
from guard.result import Flag

__all__ = ["published_cells", "row_cells"]


_WITHHELD = Flag.SUPPRESSED.value


def published_cells(
    shape: QueryShape, answer: Answer, cells: Collection[CellKey], listed: bool = False
) -> Mapping[CellKey, frozenset[int]] | None:
    """Per published cell: the indexes (into ``shape.aggregates``) of its released values.

    ``cells`` are the cells of the query in the data (values ``normalized``). None when
    the answer's rows cannot be matched to them. ``listed``: the answer is a list of
    values asked as ``shape``, a COUNT(*) query whose count (its last output) was not
    sent: each listed value's count counts as released, as the guard recorded it.
    """
    matched = row_cells(shape, answer.rows, cells, listed)
    if matched is None:
        return None
    published: dict[CellKey, frozenset[int]] = {}
    for cell, row, flags in zip(matched, answer.rows, answer.flags, strict=True):
        if listed:
            published[cell] = frozenset(range(len(shape.aggregates)))
            continue
        released = frozenset(
            output.index
            for position, output in enumerate(shape.outputs)
            if output.kind is OutputKind.AGGREGATE
            and flags[position] != _WITHHELD
            and row[position] is not None
        )
        published[cell] = published.get(cell, frozenset()) | released
    return published


def row_cells(
    shape: QueryShape, rows: Sequence[Sequence[Any]], cells: Collection[CellKey], listed: bool = False
) -> list[CellKey] | None:
    """The cell of each answer row, among ``cells`` (values ``normalized``); None when a
    row cannot be matched to exactly one of them. ``listed``: rows without the last
    output (a list of values, see :func:`published_cells`)."""
    width = len(shape.outputs) - (1 if listed else 0)
    key_at: dict[int, int] = {}
    grouping_at: dict[int, int] = {}
    for position, output in enumerate(shape.outputs):
        if output.kind is OutputKind.KEY:
            key_at.setdefault(output.index, position)
        elif output.kind is OutputKind.GROUPING:
            grouping_at.setdefault(output.index, position)
    if len(key_at) < len(shape.group_by):
        return None  # rows of different cells may look alike
    levels = shape.levels
    matched: list[CellKey] = []
    for row in rows:
        if len(row) != width:
            return None
        values = [row[key_at[i]] for i in range(len(shape.group_by))]
        rolled = [row[grouping_at[i]] if i in grouping_at else None for i in range(len(shape.group_by))]
        candidates = [
            (level, tuple(normalized(values[shape.group_by.index(k)]) for k in level))
            for level in levels
            if _fits(shape.group_by, level, values, rolled)
        ]
        candidates = [c for c in candidates if c in cells]
        if len(candidates) != 1:
            return None
        matched.append(candidates[0])
    return matched


def _fits(keys: tuple[str, ...], level: tuple[str, ...], values: list[Any], rolled: list[Any]) -> bool:
    """Whether a row with these key values (and GROUPING() outputs, None when absent) can
    belong to ``level``: its rolled-up keys are NULL and flagged, its others not flagged."""
    for i, key in enumerate(keys):
        if key in level:
            if rolled[i] not in (None, 0):
                return False
        elif values[i] is not None or rolled[i] not in (None, 1):
            return False
    return True
