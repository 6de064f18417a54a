"""How the history audit names released cells and the spaces they are audited in.

A cell of an answer is its grouping level (the keys not rolled up) and those keys'
values, as they read after a round trip through the JSON log, so that the online audit
and the offline replay of a log name the same cell the same way. A float NaN is named
by the text the log keeps for it (``guard.result.NAN_TEXT``), not by NaN or by None: NaN
is unequal to itself (two lookups of one NaN cell would miss each other), and None names
the NULL group, a cell apart from the NaN group in the engine's GROUP BY and predicates
(one name for both would merge two finest cells' query sets). The space is the
auditor a statistic feeds: ``count`` for COUNT, ``sum(m)`` for SUM(m) and AVG(m) (AVG is
audited as the SUM on the same query set).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from guard.cells import CellGrid
from guard.query.shape import AggFunc, QueryShape
from guard.result import NAN_TEXT, is_nan

__all__ = ["COUNT_SPACE", "CellKey", "cell_key", "cell_label", "normalized", "space_of"]

COUNT_SPACE = "count"

#: a cell of an answer: its grouping level (keys not rolled up) and those keys' values
CellKey = tuple[tuple[str, ...], tuple[Any, ...]]


def normalized(value: Any) -> Any:
    """A group-key value as it reads after a round trip through the JSON log."""
    if type(value) in _SAME:
        return value  # the round trip gives it back unchanged (tested); most keys are these
    if is_nan(value):
        return NAN_TEXT  # as the log writes it (ProtectedResult.logged_rows)
    return json.loads(json.dumps(value, default=_text))


#: types whose values a JSON round trip returns equal and of the same type: a string
#: (lone surrogates are escaped and read back), an int of any size (not bool, a subclass
#: the round trip keeps but that is checked by type here), None
_SAME = frozenset({str, int, type(None)})


def space_of(func: AggFunc, column: str | None) -> tuple[str, str | None]:
    """(auditor space, column whose non-NULL rows form the query set; None: every row)."""
    if func is AggFunc.COUNT:
        return COUNT_SPACE, column
    return f"sum({column})", column


def _text(value: Any) -> str:
    if isinstance(value, dt.date | dt.datetime | dt.time):
        return value.isoformat()
    return str(value)


def cell_key(shape: QueryShape, grid: CellGrid, row: int) -> CellKey:
    """The grouping level and key values of one grid row, as ``finest.query_sets`` names cells."""
    rolled = grid.rolled_up[row] if grid.rolled_up else (False,) * len(shape.group_by)
    positions = [i for i in range(len(shape.group_by)) if not rolled[i]]
    level = tuple(shape.group_by[i] for i in positions)
    return level, tuple(normalized(grid.keys[row][i]) for i in positions)


def cell_label(key: CellKey) -> str:
    """A cell for people (forensics tags, stored sets, ``guard explain``): ``region='CA'``."""
    level, values = key
    if not level:
        return "all rows"
    return ", ".join(f"{k}={v!r}" for k, v in zip(level, values, strict=True))
