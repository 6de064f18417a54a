"""Which cells of a logged answer were published: matching answer rows to grouping cells.

The guard's own log keeps the rows it sent and a flag per value, so the offline audit
counts as released only what was: a suppressed value, a row cut by LIMIT or a withheld
cell is not. A row is matched to its cell by its group-key values and its grouping
level. The guard logs each row's level with an answer of several grouping sets
(``Answer.levels``): a row whose key is NULL is then the total or the real NULL group
it was, whatever the data holds. Without it (logs written before, foreign logs) the
level is read from GROUPING() outputs, or else from which keys are NULL, among the
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
    matched = row_cells(shape, answer.rows, cells, listed, answer.levels)
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
    shape: QueryShape,
    rows: Sequence[Sequence[Any]],
    cells: Collection[CellKey],
    listed: bool = False,
    levels: Sequence[tuple[str, ...]] | None = None,
) -> list[CellKey] | None:
    """The cell of each answer row, among ``cells`` (values ``normalized``); None when a
    row cannot be matched to exactly one of them. ``listed``: rows without the last
    output (a list of values, see :func:`published_cells`). ``levels``: each row's
    grouping set as the guard logged it; when a row's does not fit it (a log that does
    not belong to the SQL, or data that changed since), rows are matched without them."""
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
    if any(len(row) != width for row in rows):
        return None
    keys = shape.group_by
    named = {frozenset(level): level for level in reversed(shape.levels)}  # the first, as the replay
    recorded = levels if levels is not None and len(levels) == len(rows) else None
    matched: list[CellKey] = []
    for r, row in enumerate(rows):
        values = [row[key_at[i]] for i in range(len(keys))]
        rolled = [row[grouping_at[i]] if i in grouping_at else None for i in range(len(keys))]
        fitting = list(shape.levels)
        if recorded is not None:  # the row's own level only
            sent = named.get(frozenset(recorded[r]))
            fitting = [] if sent is None else [sent]
        candidates = [
            (level, tuple(normalized(values[keys.index(k)]) for k in level))
            for level in fitting
            if _fits(keys, level, values, rolled)
        ]
        candidates = [c for c in candidates if c in cells]
        if len(candidates) != 1:
            # a recorded level that does not fit: match the whole answer as without levels
            return None if recorded is None else row_cells(shape, rows, cells, listed)
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
