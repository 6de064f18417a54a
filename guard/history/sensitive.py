"""Sensitive sets for the history audit: the finest cells the policy's rules flag.

Magnitude rules (dominance, p%, pq) protect *sets of rows*, not the cells someone asked
for: a dominated cell must not be recovered as the difference of released totals (for
example a margin minus the same margin over ``profession <> 'P5'``), asked or not. The
guard judges every finest cell of a table (grouped by every dimension) with the rules,
as it judges any answer's cells; the group search (``groups.py``) then treats any
nonzero combination of released answers supported inside one such cell as a disclosure,
like a group of fewer than k respondents.

Beyond exact recovery, ``protects_sensitive_sets`` keeps each such cell's feasibility
interval (an LP over every released SUM and the declared bounds) as wide as the rule's
protection levels, which hold against the largest contributor or the coalition.

These decisions read the data's values (the rules are value-based by definition), so a
refusal they cause can tell that some cell is sensitive; it tells no more than the
cell suppression of an answer that groups by every dimension already does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap

from guard.history.finest import FinestCells
from guard.history.intervals import feasible_interval
from guard.history.keys import normalized
from guard.history.universe import AuditCells, Universe
from guard.query.shape import QueryShape

__all__ = [
    "MAX_INTERVAL_SETS",
    "FinestSensitivity",
    "SensitiveSets",
    "protects_sensitive_sets",
    "sensitive_sets",
]

#: the shape grouping a table by every dimension, and per magnitude space the cells the
#: rules flag: group key (dimension values, in the shape's order), the cell's total, and
#: its (lower, upper) protection levels
FinestSensitivity = tuple[QueryShape, dict[str, list[tuple[tuple[Any, ...], float, tuple[float, float]]]]]


@dataclass(frozen=True, eq=False)
class SensitiveSets:
    """``of[i]``: the sensitive set audit row id i lies in, or -1; per set its audit row
    ids, true total and (lower, upper) protection levels."""

    of: npt.NDArray[np.int64]
    members: tuple[npt.NDArray[np.int64], ...]
    totals: tuple[float, ...]
    levels: tuple[tuple[float, float], ...]


def sensitive_sets(
    sensitivity: FinestSensitivity | None, finest: FinestCells, rows: Universe, space: str
) -> SensitiveSets | None:
    """The sensitive sets of one audit state (None: there are none)."""
    if sensitivity is None:
        return None
    shape, flagged = sensitivity
    cells_flagged = flagged.get(space)
    if not cells_flagged or not space.startswith("sum("):
        return None
    measure = space[4:-1]
    (cells,) = finest.query_sets(shape, [(space, measure, frozenset({0}))])
    level = tuple(shape.group_by)
    found = np.full(rows.cells.count, -1, dtype=np.int64)
    members: list[npt.NDArray[np.int64]] = []
    totals: list[float] = []
    levels: list[tuple[float, float]] = []
    for values, total, level_pair in cells_flagged:
        ids = cells.cells.get((level, tuple(normalized(v) for v in values)))
        audit_ids = None if ids is None or not ids.size else rows.ids(finest.data_version, ids)
        if audit_ids is None or not audit_ids.size:
            continue
        found[audit_ids] = len(members)
        members.append(audit_ids)
        totals.append(total)
        levels.append(level_pair)
    if not members:
        return None
    return SensitiveSets(found, tuple(members), tuple(totals), tuple(levels))


#: sensitive sets one decision may bound by LP; more in the candidate's reach withholds it
MAX_INTERVAL_SETS = 32


def protects_sensitive_sets(
    sets: SensitiveSets,
    cells: AuditCells,
    released: Sequence[BitMap],
    values: Sequence[float | None],
    candidate: npt.NDArray[np.int64],
    value: float,
    bounds: tuple[float, float],
) -> bool:
    """With the candidate SUM released, does every sensitive set keep a feasibility
    interval that reaches its protection levels (max >= total + upper, min <= total -
    lower), given every released SUM and the declared bounds? An LP (``intervals.py``)
    per set within the candidate's reach: the released sets connected to it through shared
    rows (the others' intervals cannot change). A set already short of its levels before
    is not the candidate's doing when its interval does not move. Over
    ``MAX_INTERVAL_SETS`` sets, or an LP that fails, the answer is False (withhold).

    The protection levels encode the insider (the largest contributor, or the coalition,
    as each rule defines), as in the suppression's interval audit. This check reads
    released values and the candidate's true value: its refusals are value-based, as the
    rules themselves are."""
    known = [(b, float(v)) for b, v in zip(released, values, strict=True) if v is not None]
    fresh = BitMap(candidate.tolist())
    reach, linked = BitMap(fresh), []
    remaining = list(range(len(known)))
    grown = True
    while grown:
        grown = False
        for i in list(remaining):
            if known[i][0].intersect(reach):
                reach |= known[i][0]
                linked.append(known[i])
                remaining.remove(i)
                grown = True
    near = np.unique(sets.of[np.fromiter(reach, dtype=np.int64, count=len(reach))])
    near = near[near >= 0]
    if near.size > MAX_INTERVAL_SETS:
        return False
    after = [*linked, (fresh, value)]
    for number in near.tolist():
        low_level, high_level = sets.levels[number]
        total, members = sets.totals[number], sets.members[number]
        low, high = feasible_interval(cells, after, members, bounds)
        if low is None or high is None:
            return False
        slack = 1e-6 * max(1.0, abs(total))
        if high >= total + high_level - slack and low <= total - low_level + slack:
            continue
        before_low, before_high = (
            feasible_interval(cells, linked, members, bounds) if linked else (None, None)
        )
        unchanged = (
            before_low is not None
            and before_high is not None
            and abs(before_low - low) <= slack
            and abs(before_high - high) <= slack
        )
        if not unchanged:
            return False
    return True
