"""Proving sensitive sets' intervals in the atom model, cheapest first.

A flagged set is proven when its total reaches its targets (its protection levels, or
what the bounds allow) at feasible points: atom totals that satisfy every released SUM
(``atomlp.AtomIntervals.reach``). The points come from, in order:

1. points carried from the audit state's last check (``carry.py``);
2. one spread: every atom the sets touch pushed down, then up, together;
3. joint pushes: one solve moving every atom of a set still short on its upper side up
   and every atom of one short on its lower side down (random positive weights); on a
   table of many dimensions one push proves dozens of sets, where an exact interval
   costs a pair of solves per set;
4. exact intervals, per atom or per set over several atoms (``AtomIntervals.exact``),
   within the decision's budgets; their optima are points for the sets after them.

A set whose exact interval falls short is reported with that interval; one past the
budgets, or whose solve fails, is neither proven nor short (the caller withholds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from guard.arrays import distinct
from guard.history.atomlp import AtomIntervals

__all__ = ["MAX_ATOM_INTERVALS", "MAX_PUSHES", "MAX_SPLIT_INTERVALS", "Part", "affordable", "prove", "shares"]

Ids = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]

#: atoms whose total one decision may bound by LP (two small LPs each, about 1 ms per
#: solve with primal simplex restarts: 100 when each took 6 ms)
MAX_ATOM_INTERVALS = 400
#: sets over several atoms one decision may bound exactly in the atom model
#: (``AtomIntervals.split``: a pair of solves from the last basis each)
MAX_SPLIT_INTERVALS = 400
#: joint pushes one decision may solve before the exact intervals of single sets
MAX_PUSHES = 60


@dataclass(frozen=True)
class Part:
    """A set in the atom model: its atoms, its rows in each, its rows in no released set
    (free within their bounds), and how far its total must reach down and up (round-off
    slack included)."""

    own: Ids
    share: Floats
    free: float
    need_low: float
    need_high: float


def shares(members: Ids, slot: Ids, atom: Ids, counts: Ids) -> tuple[Ids, Floats, float]:
    """A set's atoms in a reach, its rows in each, and its rows outside the reach."""
    inside = slot[members]
    within = inside >= 0
    touched, where = np.unique(atom[inside[within]], return_inverse=True)
    held = np.bincount(where.reshape(-1), weights=counts[members[within]], minlength=touched.size)
    return touched, held.astype(np.float64), float(counts[members[~within]].sum())


def affordable(intervals: AtomIntervals, own: Ids) -> bool:
    """Whether the decision's LP budgets allow the exact interval of a set over ``own``."""
    if own.size == 1:
        return intervals.solved < MAX_ATOM_INTERVALS or intervals.known(int(own[0]))
    return own.size == 0 or intervals.splits < MAX_SPLIT_INTERVALS


def prove(
    intervals: AtomIntervals, parts: Sequence[Part], bounds: tuple[float, float]
) -> tuple[npt.NDArray[np.bool_], dict[int, tuple[float, float]]]:
    """Per part: proven or not; and the exact intervals (free rows included) of the parts
    that fall short, by position (module docstring)."""
    low_bound, high_bound = bounds

    def reaches(part: Part, low: float, high: float) -> bool:
        return (
            low + low_bound * part.free <= part.need_low and high + high_bound * part.free >= part.need_high
        )

    touched = [p.own for p in parts]
    intervals.spread(distinct(np.concatenate(touched)) if touched else np.zeros(0, dtype=np.int64))
    proven = _pushed(intervals, parts, bounds)
    pushed = intervals.found
    short: dict[int, tuple[float, float]] = {}
    for j, part in enumerate(parts):
        if proven[j]:
            continue
        # the exact solves of the parts before left points that may prove this one
        if reaches(part, *intervals.reach_since(part.own, part.share, pushed)):
            proven[j] = True
            continue
        if not affordable(intervals, part.own):
            continue
        low, high = intervals.exact(part.own, part.share)
        if low is None or high is None:
            continue
        proven[j] = reaches(part, low, high)
        if not proven[j]:
            short[j] = (low + low_bound * part.free, high + high_bound * part.free)
    return proven, short


def _pushed(
    intervals: AtomIntervals, parts: Sequence[Part], bounds: tuple[float, float]
) -> npt.NDArray[np.bool_]:
    """Which parts reach their targets at the points found so far and after joint pushes.
    Pushes stop when one proves fewer than 2 parts (or 2 % of those open): what a pair
    of exact solves would."""
    size = len(parts)
    need_low = np.array([p.need_low - bounds[0] * p.free for p in parts])
    need_high = np.array([p.need_high - bounds[1] * p.free for p in parts])
    low, high = np.full(size, np.inf), np.full(size, -np.inf)
    seen = 0
    rng = np.random.default_rng(size)  # deterministic: the same history, the same pushes

    def refresh() -> int:
        nonlocal seen
        for j in np.flatnonzero((low > need_low) | (high < need_high)).tolist():
            found_low, found_high = intervals.reach_since(parts[j].own, parts[j].share, seen)
            low[j], high[j] = min(low[j], found_low), max(high[j], found_high)
        seen = intervals.found
        return int(((low > need_low) | (high < need_high)).sum())

    pending = refresh()
    for _ in range(MAX_PUSHES):
        if not pending:
            break
        up = _atoms_of(parts, high < need_high)
        down = _atoms_of(parts, low > need_low)
        both = np.intersect1d(up, down)
        if both.size:  # wanted both ways: each goes one way this time
            upward = rng.random(both.size) < 0.5
            up = np.setdiff1d(up, both[~upward])
            down = np.setdiff1d(down, both[upward])
        if not intervals.push(up, down, rng):
            break
        left = refresh()
        if pending - left < max(2.0, 0.02 * pending):
            break
        pending = left
    return (low <= need_low) & (high >= need_high)


def _atoms_of(parts: Sequence[Part], chosen: npt.NDArray[np.bool_]) -> Ids:
    picked = [parts[j].own for j in np.flatnonzero(chosen).tolist()]
    return distinct(np.concatenate(picked)) if picked else np.zeros(0, dtype=np.int64)
