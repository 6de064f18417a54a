"""Shared by the sensitive-set tests: audit rows with row counts, the row LP written with
scipy (the oracle), and random released SUMs with their atom model."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap
from scipy.optimize import linprog

from guard.history.atomlp import AtomIntervals, atoms_of

Ids = npt.NDArray[np.int64]


class Cells:
    """Audit rows with row counts (the AuditCells protocol, as far as the check reads)."""

    def __init__(self, counts: Ids) -> None:
        self._counts = counts

    @property
    def count(self) -> int:
        return int(self._counts.size)

    def units(self, ids: Ids) -> int:
        return int(self._counts[ids].sum())

    def unit_ids(self, ids: Ids) -> BitMap:
        raise NotImplementedError

    def rows(self, ids: Ids) -> int:
        return int(self._counts[np.asarray(ids, dtype=np.int64)].sum())

    def row_counts(self) -> Ids:
        return self._counts


def lp_interval(
    counts: Ids, sets: list[tuple[BitMap, float]], target: Ids, bounds: tuple[float, float]
) -> tuple[float, float]:
    n = counts.size
    a = np.zeros((len(sets), n))
    for i, (members, _) in enumerate(sets):
        a[i, list(members)] = 1.0
    b = np.array([v for _, v in sets])
    box = [(bounds[0] * c, bounds[1] * c) for c in counts]
    goal = np.zeros(n)
    goal[target] = 1.0
    low = linprog(goal, A_eq=a, b_eq=b, bounds=box, method="highs")
    high = linprog(-goal, A_eq=a, b_eq=b, bounds=box, method="highs")
    assert low.status == 0 and high.status == 0
    return float(low.fun), float(-high.fun)


def released_sums(
    rng: np.random.Generator,
) -> tuple[int, tuple[float, float], np.ndarray, list[tuple[BitMap, float]]]:
    """A few released SUMs over random subsets of a handful of rows with random counts."""
    n = int(rng.integers(5, 25))
    bounds = (0.0, float(rng.choice([1.0, 60.0])))
    counts = rng.integers(1, 4, size=n).astype(np.int64)
    values = rng.uniform(bounds[0], bounds[1], size=n) * counts * (rng.random(n) < 0.6)
    released: list[tuple[BitMap, float]] = []
    for _ in range(int(rng.integers(1, 7))):
        members = np.flatnonzero(rng.random(n) < rng.uniform(0.2, 0.9))
        if members.size:
            released.append((BitMap(members.tolist()), float(values[members].sum())))
    return n, bounds, counts, released


def atom_intervals(seed: int) -> tuple[Any, ...] | None:
    """Random released SUMs (None: none) with their reach, atoms and ``AtomIntervals``."""
    n, bounds, counts, released = released_sums(np.random.default_rng(seed))
    if not released:
        return None
    reach = np.array(sorted(BitMap.union(*(m for m, _ in released))), dtype=np.int64)
    slot, atom = atoms_of(released, reach, n)
    intervals = AtomIntervals(released, slot, atom, counts[reach].astype(np.float64), bounds)
    return bounds, counts, released, reach, slot, atom, intervals
