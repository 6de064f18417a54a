"""Partial disclosure: how narrowly released SUMs pin a small group's total, by LP.

The exact audit (``span.py``) only asks whether a total is *determined*. With declared
bounds [lo, hi] per row, released SUMs can also pin a group's total into a narrow
interval without determining it (e.g. a SUM at its upper bound pins every row to hi).
Given the released SUMs and a candidate, the feasible interval of an atom's total is
[min, max] of its finest cells' sum subject to every released SUM and the box
rows x [lo, hi] of each finest cell: two LPs (HiGHS) per atom the candidate touches.

Row counts of finest cells are not public, so these boxes are tighter than an
attacker's: the intervals are narrower than what an attacker can derive, and the check
errs on the side of refusing. It reads released values and the candidate's true value,
so a refusal is not simulatable (it tells that the value is near an extreme): the
policy's ``tolerance`` turns it on knowingly. It costs two LPs per small atom over every
earlier released SUM of the audit state, far more than the exact audit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap
from scipy.sparse import csc_matrix

from guard.history.atomlp import both_ends, sums_model
from guard.history.rowsets import as_row_ids

if TYPE_CHECKING:
    from guard.history.universe import AuditCells


__all__ = ["IntervalAudit", "feasible_interval"]

Ids = npt.NDArray[np.int64]


class IntervalAudit:
    """Refuses a SUM whose release would pin a group of fewer than ``k`` units to an
    interval narrower than ``tolerance`` x its a-priori range."""

    def __init__(self, finest: AuditCells, bounds: tuple[float, float], tolerance: float, k: int) -> None:
        self._finest = finest
        self._low, self._high = bounds
        self._tolerance = tolerance
        self._k = k

    def too_narrow(
        self, released: Sequence[BitMap], values: Sequence[float | None], candidate: Ids, value: float | None
    ) -> bool:
        if value is None or self._high <= self._low:
            return False
        sets = [(b, v) for b, v in zip(released, values, strict=True) if v is not None]
        sets.append((BitMap(candidate.tolist()), value))
        for atom in self._small_atoms([b for b, _ in sets], candidate):
            low, high = feasible_interval(self._finest, sets, atom, (self._low, self._high))
            if low is None or high is None:
                return True  # infeasible in floating point: cannot vouch for it
            prior = self._finest.rows(atom) * (self._high - self._low)
            if high - low < self._tolerance * prior:
                return True
        return False

    def _small_atoms(self, sets: Sequence[BitMap], candidate: Ids) -> list[Ids]:
        """The candidate's cells grouped by which released sets hold them, if < k units."""
        signature: dict[tuple[int, ...], list[int]] = {}
        for cell in candidate.tolist():
            member = tuple(i for i, s in enumerate(sets) if cell in s)
            signature.setdefault(member, []).append(cell)
        atoms = [np.asarray(c, dtype=np.int64) for c in signature.values()]
        return [a for a in atoms if self._finest.units(a) < self._k]


def feasible_interval(
    finest: AuditCells, sets: Sequence[tuple[BitMap, float]], target: Ids, bounds: tuple[float, float]
) -> tuple[float | None, float | None]:
    """[min, max] of the total over ``target`` given each set's SUM and per-row bounds;
    None sides when the LP is infeasible (numerically). One HiGHS model, solved in both
    senses (the second starts from the first's basis)."""
    cells = np.asarray(
        BitMap.union(BitMap(target.tolist()), *(members for members, _ in sets)), dtype=np.int64
    )
    lines, columns = [], []
    for i, (members, _) in enumerate(sets):
        inside = np.searchsorted(cells, as_row_ids(members))
        lines.append(np.full(inside.size, i, dtype=np.int64))
        columns.append(inside)
    line = np.concatenate(lines) if lines else np.zeros(0, dtype=np.int64)
    column = np.concatenate(columns) if columns else np.zeros(0, dtype=np.int64)
    matrix = csc_matrix((np.ones(line.size), (line, column)), shape=(len(sets), cells.size))
    totals = np.asarray([v for _, v in sets], dtype=np.float64)
    counts = finest.row_counts()[cells].astype(np.float64)
    objective = np.zeros(cells.size)
    objective[np.searchsorted(cells, target)] = 1.0
    highs = sums_model(matrix, totals, counts * bounds[0], counts * bounds[1], objective)
    ends = both_ends(highs)
    return ends[0], ends[1]
