"""Feasible points carried from one sensitive-set check to the next.

The sensitive-set check (``sensitive.protects_sensitive_sets``) proves most flagged cells
by *feasible points*: atom totals that satisfy every released SUM, at which the cell's
share of its atom reaches its protection levels (``atomlp.AtomIntervals.reach``). On a
table of many dimensions, after a few dozen answers nearly every flagged cell needs a
point of its own, and finding it costs an LP per atom: hundreds of solves per published
cell (about 1.4 s per cell on the Fair session's occupation x husband's occupation).

Consecutive checks of one audit state differ by one equation: the new candidate (every
other released SUM of the new check was in the previous check too, and the previous
candidate was either released, or its equation is one the points satisfy in excess).
A point of the previous check is a point of the new one if its atom totals can be split
along the candidate: each earlier atom A divides into its rows inside and outside the
candidate, the inside part within [max(lo n_in, T_A - hi n_out), min(hi n_in, T_A - lo
n_out)] (both parts within their boxes), and the inside parts (with the candidate's rows
no earlier SUM held, free within theirs) must add up to the candidate's total: one
interval sum per point, a vectorized test. A point that passes is spread along the
candidate (each atom at the same fraction of its range) and aggregated to the new
atoms; one that misses is mixed with a point missing on the other side (``_balanced``);
only cells near the candidate need a new LP.

Every carried point is checked again against every equation of the new check and every
atom's box before it is used (``AtomIntervals.add_points``): a point proves a cell only
by being feasible, so a wrong carry can cost an LP but never pass a cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap

from guard.arrays import distinct

__all__ = ["CarriedPoints", "PointCarry"]

Ids = npt.NDArray[np.int64]
Points = npt.NDArray[np.float64]

#: points kept for the next check (the newest first): enough for the hundreds of atoms a
#: check solves, few enough that lifting them stays a few milliseconds
MAX_CARRIED = 1600


@dataclass(frozen=True, eq=False)
class CarriedPoints:
    """Points of one check: ``atom_of[i]`` is audit row i's atom (-1 outside the check's
    reach), ``points`` atom totals (one row per point), ``satisfied`` the positions in
    the state's released list whose SUMs every point satisfies, and the check's candidate
    (its rows, its total, and the position it takes if it is released)."""

    atom_of: Ids
    points: Points
    satisfied: frozenset[int]
    candidate: BitMap
    value: float
    position: int


class PointCarry:
    """The points of an audit state's last sensitive-set check (mutated under the
    state's release lock, like the rest of the state)."""

    def __init__(self) -> None:
        self._last: CarriedPoints | None = None

    def keep(self, carried: CarriedPoints) -> None:
        self._last = carried

    def lift(
        self,
        released: Sequence[BitMap],
        values: Sequence[float | None],
        linked: list[int],
        candidate: Ids,
        value: float,
        reach: Ids,
        atom: Ids,
        counts: Ids,
        bounds: tuple[float, float],
    ) -> Points | None:
        """The last check's points as atom totals of this check (``reach``/``atom``: this
        check's rows and their atoms; ``linked``: positions of its released SUMs), or None
        when none carries over (another SUM joined, or none splits along the
        candidate)."""
        last = self._last
        if last is None or not last.points.size:
            return None
        satisfied = set(last.satisfied)
        if (
            last.position < len(released)
            and values[last.position] == last.value
            and released[last.position] == last.candidate
        ):
            satisfied.add(last.position)  # the last candidate was released
        if not set(linked) <= satisfied:
            return None
        size = max(int(reach.max()) + 1 if reach.size else 0, last.atom_of.size)
        old_of = np.full(size, -1, dtype=np.int64)
        old_of[: last.atom_of.size] = last.atom_of
        before = old_of[reach]
        inside = np.zeros(size, dtype=bool)
        inside[candidate] = True
        inside = inside[reach]
        rows = counts[reach].astype(np.float64)
        if (before[~inside] < 0).any():
            return None  # rows of a SUM the last check did not hold
        olds = last.points.shape[1]
        rows_in = np.bincount(
            before[inside & (before >= 0)], weights=rows[inside & (before >= 0)], minlength=olds
        )
        rows_out = np.bincount(before[~inside], weights=rows[~inside], minlength=olds)
        free = float(rows[inside & (before < 0)].sum())
        low_bound, high_bound = bounds
        totals = last.points
        low = np.maximum(low_bound * rows_in, totals - high_bound * rows_out)
        high = np.minimum(high_bound * rows_in, totals - low_bound * rows_out)
        low_sum = low.sum(axis=1) + low_bound * free
        high_sum = high.sum(axis=1) + high_bound * free
        slack = 1e-7 * max(1.0, abs(value))
        splits = (low <= high + slack).all(axis=1)
        if not splits.any():
            return None
        low, high, totals = low[splits], high[splits], totals[splits]
        low_sum, high_sum = low_sum[splits], high_sum[splits]
        # each point at the split nearest the candidate's total: exact where it fits,
        # else at one end, off by ``residual`` on the candidate's equation alone
        span = high_sum - low_sum
        share = np.where(span > 0, (value - low_sum) / np.where(span > 0, span, 1.0), 0.0)
        share = np.clip(share, 0.0, 1.0)[:, None]
        residual = low_sum + share[:, 0] * span - value
        part_in = low + share * (high - low)
        free_total = (low_bound + share[:, 0] * (high_bound - low_bound)) * free
        # each new atom is a union of (earlier atom, inside or not) pieces: add them up
        count = int(atom.max()) + 1 if atom.size else 0
        lifted = np.zeros((totals.shape[0], count), dtype=np.float64)
        for side, part in ((True, part_in), (False, totals - part_in)):
            rows_mask = (inside == side) & (before >= 0)
            pieces = np.unique(np.stack([before[rows_mask], atom[rows_mask]]), axis=1)
            np.add.at(lifted.T, pieces[1], part[:, pieces[0]].T)
        if free:
            free_rows = inside & (before < 0)
            free_atoms = distinct(atom[free_rows])
            weights = np.bincount(atom[free_rows], weights=rows[free_rows], minlength=count)[free_atoms]
            lifted[:, free_atoms] += free_total[:, None] * (weights / free)[None, :]
        return _balanced(lifted, residual, slack)


def _balanced(lifted: Points, residual: npt.NDArray[np.float64], slack: float) -> Points | None:
    """The lifted points that satisfy the candidate's equation, and for each that misses
    it, its mix with the point missing most on the other side: both satisfy every other
    equation and box, so the mix does, and at the weight that cancels the two residuals
    it satisfies the candidate's too. Pushed points sit at extremes of the old equations,
    where the new one rarely passes: on the Fair session's yrs_married x religious, no
    single point fitted in 15 of 17 checks; the mix keeps most of each point's reach
    (weight |r_j| / (|r_i| + |r_j|) on it)."""
    fits = np.abs(residual) <= slack
    below, above = np.flatnonzero(residual < -slack), np.flatnonzero(residual > slack)
    kept = [lifted[fits]]
    if below.size and above.size:
        for side, partner in (
            (below, int(above[np.argmax(residual[above])])),
            (above, int(below[np.argmin(residual[below])])),
        ):
            own = np.abs(residual[side])
            other = abs(float(residual[partner]))
            weight = (other / (own + other))[:, None]
            kept.append(weight * lifted[side] + (1.0 - weight) * lifted[partner][None, :])
    out = np.concatenate(kept)
    return out if out.size else None


def carried(
    atom_of_reach: Ids,
    reach: Ids,
    size: int,
    points: Points,
    linked: list[int],
    candidate: Ids,
    value: float,
    position: int,
) -> CarriedPoints:
    """What a check leaves for the next one (the newest ``MAX_CARRIED`` points)."""
    atom_of = np.full(size, -1, dtype=np.int64)
    atom_of[reach] = atom_of_reach
    return CarriedPoints(
        atom_of,
        points[-MAX_CARRIED:].copy(),
        frozenset(linked),
        BitMap(candidate.tolist()),
        value,
        position,
    )
