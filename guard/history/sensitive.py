"""Sensitive sets for the history audit: the finest cells the policy's rules flag.

Magnitude rules (dominance, p%, pq) protect *sets of rows*, not the cells someone asked
for: a dominated cell must not be recovered as the difference of released totals (for
example a margin minus the same margin over ``profession <> 'P5'``), asked or not. The
guard judges every finest cell of a table (grouped by every dimension) with the rules,
as it judges any answer's cells; the group search (``groups.py``) then treats any
nonzero combination of released answers supported inside one such cell as a disclosure,
like a group of fewer than k respondents.

These decisions read the data's values (the rules are value-based by definition), so a
refusal they cause can tell that some cell is sensitive; it tells no more than the
cell suppression of an answer that groups by every dimension already does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from guard.history.finest import FinestCells
from guard.history.keys import normalized
from guard.history.universe import Universe
from guard.query.shape import QueryShape

__all__ = ["FinestSensitivity", "sensitive_sets"]

#: the shape grouping a table by every dimension, and per magnitude space the group keys
#: (dimension values, in the shape's order) the rules flag
FinestSensitivity = tuple[QueryShape, dict[str, list[tuple[Any, ...]]]]


def sensitive_sets(
    sensitivity: FinestSensitivity | None, finest: FinestCells, rows: Universe, space: str
) -> npt.NDArray[np.int64] | None:
    """Per audit row id: the sensitive set it belongs to, or -1 (None: no sensitive set)."""
    if sensitivity is None:
        return None
    shape, flagged = sensitivity
    keys = flagged.get(space)
    if not keys or not space.startswith("sum("):
        return None
    measure = space[4:-1]
    (cells,) = finest.query_sets(shape, [(space, measure, frozenset({0}))])
    level = tuple(shape.group_by)
    found = np.full(rows.cells.count, -1, dtype=np.int64)
    for number, values in enumerate(keys):
        ids = cells.cells.get((level, tuple(normalized(v) for v in values)))
        if ids is None or not ids.size:
            continue
        audit_ids = rows.ids(finest.data_version, ids)
        if audit_ids is not None:
            found[audit_ids] = number
    return found if (found >= 0).any() else None
