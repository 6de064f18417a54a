"""Feasibility intervals by atoms: the exact LP of the sensitive-set check, made small.

Rows that lie in exactly the same released sets (an *atom* of the reach) are
interchangeable for every released SUM, so the row LP of ``intervals.feasible_interval``
(one variable per audit row, thousands on a table of many dimensions) has the same
answer as an LP over atom totals T_a in [lo n_a, hi n_a] with one equation per released
SUM. For a set F inside one atom A, whatever the other atoms do,

    max F = min(hi n_F, max T_A - lo n_(A minus F)),
    min F = max(lo n_F, min T_A - hi n_(A minus F)),

because any T_A in its feasible range can be split between F and the rest of A within
their boxes. So one pair of small LPs per atom serves every flagged cell in it: the
check can afford the cells the feasible-point certificate (``sensitive.certified_sets``)
leaves open, where an LP over rows per cell was out of reach.

A set over several atoms (``AtomIntervals.split``) is exact in the same space: per atom A
it touches, one more variable F_A (its share, within lo n_F..hi n_F) and one ranged row
T_A - hi n_(A minus F) <= F_A <= T_A - lo n_(A minus F) (the rest of A within its box);
max / min of the sum of the F_A is the row LP's, with a handful of columns more than the
atom model instead of one per row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import highspy
import numpy as np
import numpy.typing as npt
from pyroaring import BitMap
from scipy.sparse import csc_matrix

from guard.arrays import distinct
from guard.highs import lp_model
from guard.history.rowsets import as_row_ids

__all__ = ["AtomIntervals", "atoms_of", "both_ends", "sums_model"]


Ids = npt.NDArray[np.int64]


#: HiGHS's ``simplex_strategy`` value for the primal simplex
PRIMAL_SIMPLEX = 4


def sums_model(
    matrix: csc_matrix,
    totals: npt.NDArray[np.float64],
    lower: npt.NDArray[np.floating[Any]],
    upper: npt.NDArray[np.floating[Any]],
    cost: npt.NDArray[np.float64] | None = None,
) -> highspy.Highs:
    """A quiet HiGHS model of released SUMs: variable j within [lower_j, upper_j], row i
    of ``matrix`` (0/1, one row per released set) equal to ``totals[i]``; objective
    ``cost`` (zero when None)."""
    cost = np.zeros(matrix.shape[1]) if cost is None else cost
    highs = lp_model(matrix, cost, lower, upper, totals, totals)
    # every later solve changes only the objective: the last basis stays primal feasible,
    # so primal simplex restarts from it where HiGHS's default (dual) starts over; 8.8x
    # faster per solve on the Fair session's atom LPs (0.64 vs 5.6 ms), same optima
    highs.setOptionValue("simplex_strategy", PRIMAL_SIMPLEX)
    return highs


def both_ends(
    highs: highspy.Highs, point: Callable[[npt.NDArray[np.float64]], None] | None = None
) -> list[float | None]:
    """[min, max] of the model's objective (the second solve starts from the first's
    basis); None for a side the solver does not prove optimal. ``point`` receives each
    optimal solution."""
    ends: list[float | None] = []
    for sense in (highspy.ObjSense.kMinimize, highspy.ObjSense.kMaximize):
        highs.changeObjectiveSense(sense)
        highs.run()
        if highs.getModelStatus() == highspy.HighsModelStatus.kTimeLimit:
            return [None, None]  # out of the caller's time (``AtomIntervals.limit``): no retry
        optimal = highs.getModelStatus() == highspy.HighsModelStatus.kOptimal
        if not optimal:
            # a warm start from an earlier solve's basis can end unproven (measured: ~4 %
            # of one test's models after several solves); once more from scratch
            highs.clearSolver()
            highs.run()
            optimal = highs.getModelStatus() == highspy.HighsModelStatus.kOptimal
        ends.append(float(highs.getInfo().objective_function_value) if optimal else None)
        if optimal and point is not None:
            point(np.asarray(highs.getSolution().col_value, dtype=np.float64))
    return ends


def atoms_of(after: Sequence[tuple[BitMap, float]], reach: Ids, size: int) -> tuple[Ids, Ids]:
    """(slot, atom): ``slot[i]`` is audit row i's position in ``reach`` (-1 outside it),
    ``atom[j]`` the atom of reach position j (0 .. atoms - 1)."""
    slot = np.full(size, -1, dtype=np.int64)
    slot[reach] = np.arange(reach.size)
    # two random 64-bit weights per released set: rows with equal sums are in the same
    # atom (a false merge has probability about (rows / 2**64)**2 per pair of atoms)
    rng = np.random.default_rng()
    signature = np.zeros((reach.size, 2), dtype=np.uint64)
    for members, _ in after:
        weights = rng.integers(1, np.iinfo(np.int64).max, size=2, dtype=np.int64).astype(np.uint64)
        signature[slot[as_row_ids(members)]] += weights
    if not reach.size:
        return slot, np.zeros(0, dtype=np.int64)
    _, atom = np.unique(signature, axis=0, return_inverse=True)
    return slot, atom.reshape(-1).astype(np.int64)


class AtomIntervals:
    """[min, max] of each atom's total given the released SUMs and the row bounds.

    One HiGHS model per decision: each atom's bounds change only the objective, so every
    solve after the first starts from the previous basis (a few pivots, not a new LP)."""

    def __init__(
        self,
        after: Sequence[tuple[BitMap, float]],
        slot: Ids,
        atom: Ids,
        rows: npt.NDArray[np.float64],
        bounds: tuple[float, float],
    ) -> None:
        count = int(atom.max()) + 1 if atom.size else 0
        self._rows = np.bincount(atom, weights=rows, minlength=count)
        lines, columns = [], []
        for i, (members, _) in enumerate(after):
            inside = distinct(atom[slot[as_row_ids(members)]])
            lines.append(np.full(inside.size, i, dtype=np.int64))
            columns.append(inside)
        line = np.concatenate(lines) if lines else np.zeros(0, dtype=np.int64)
        column = np.concatenate(columns) if columns else np.zeros(0, dtype=np.int64)
        matrix = csc_matrix((np.ones(line.size), (line, column)), shape=(len(after), count))
        totals = np.asarray([v for _, v in after], dtype=np.float64)
        self._highs = sums_model(matrix, totals, self._rows * bounds[0], self._rows * bounds[1])
        self._matrix, self._totals = matrix.tocsr(), totals
        self._found: dict[int, tuple[float | None, float | None]] = {}
        self._bounds = bounds
        #: the feasible points every solve found (atom totals that satisfy every SUM), the
        #: first ``_count`` rows; grown by doubling, as every exact solve adds two
        self._points = np.empty((0, count), dtype=np.float64)
        self._count = 0
        #: sets bounded by :meth:`split` so far (the caller's budget)
        self.splits = 0

    @property
    def solved(self) -> int:
        """Atoms bounded so far (the caller's budget)."""
        return len(self._found)

    def known(self, atom: int) -> bool:
        return atom in self._found

    def rows(self, atom: int) -> float:
        return float(self._rows[atom])

    def interval(self, atom: int) -> tuple[float | None, float | None]:
        """None sides when the LP fails (numerically): the caller cannot vouch for it."""
        if atom not in self._found:
            ends = self._solve(np.array([atom]))
            self._found[atom] = (ends[0], ends[1])
        return self._found[atom]

    def limit(self, seconds: float) -> None:
        """Stop each later solve after ``seconds`` (it then ends unproven: None sides)."""
        self._highs.setOptionValue("time_limit", max(float(seconds), 0.0))

    def whole(self, atoms: npt.NDArray[np.int64]) -> tuple[float | None, float | None]:
        """[min, max] of the total of the whole atoms ``atoms`` (only the objective
        changes: the solves start from the last basis). None sides when the LP fails."""
        ends = self._solve(atoms)
        return ends[0], ends[1]

    def reach(self, atoms: npt.NDArray[np.int64], rows: npt.NDArray[np.float64]) -> tuple[float, float]:
        """How far down and up the total of a set reaches that holds ``rows[i]`` rows of
        atom ``atoms[i]`` (and nothing outside them), at the feasible points found so far:
        at each point, every atom's total splits freely between the set's rows and the
        atom's others within their bounds. (inf, -inf) before any point."""
        return self.reach_since(atoms, rows, 0)

    def reach_since(
        self, atoms: npt.NDArray[np.int64], rows: npt.NDArray[np.float64], start: int
    ) -> tuple[float, float]:
        """:meth:`reach` at the points found from the ``start``-th on."""
        if self._count <= start:
            return np.inf, -np.inf
        low_bound, high_bound = self._bounds
        totals = self._points[start : self._count, atoms]
        rest = self._rows[atoms] - rows
        high = np.minimum(high_bound * rows, totals - low_bound * rest).sum(axis=1)
        low = np.maximum(low_bound * rows, totals - high_bound * rest).sum(axis=1)
        return float(low.min()), float(high.max())

    def split(
        self, atoms: npt.NDArray[np.int64], rows: npt.NDArray[np.float64]
    ) -> tuple[float | None, float | None]:
        """The exact [min, max] of the total of a set holding ``rows[i]`` rows of atom
        ``atoms[i]`` (and nothing outside them): the atom model with the set's share of
        each atom as a column of its own, bounded by its rows and tied to the atom's total
        by the rest of the atom's box (module docstring). The columns and rows are removed
        again afterwards, so the model's basis serves the next solve. None sides when the
        LP fails."""
        self.splits += 1
        highs = self._highs
        low_bound, high_bound = self._bounds
        size = atoms.size
        first_col, first_row = highs.getNumCol(), highs.getNumRow()
        rest = self._rows[atoms] - rows
        highs.addCols(
            size,
            np.zeros(size),
            low_bound * rows,
            high_bound * rows,
            0,
            np.zeros(size, dtype=np.int32),
            np.zeros(0, dtype=np.int32),
            np.zeros(0),
        )
        # row j: F_j - T_(atoms[j]) within [-hi rest_j, -lo rest_j]
        index = np.empty(2 * size, dtype=np.int32)
        index[0::2] = first_col + np.arange(size)
        index[1::2] = atoms
        value = np.tile(np.array([1.0, -1.0]), size)
        highs.addRows(
            size,
            -high_bound * rest,
            -low_bound * rest,
            2 * size,
            np.arange(0, 2 * size, 2, dtype=np.int32),
            index,
            value,
        )
        new_cols = (first_col + np.arange(size)).astype(np.int32)
        highs.changeColsCost(size, new_cols, np.ones(size))
        try:
            # the optima's atom totals satisfy every SUM: points for later sets too
            ends = both_ends(highs, lambda point: self._add_point(point[:first_col]))
        finally:
            highs.deleteRows(size, (first_row + np.arange(size)).astype(np.int32))
            highs.deleteCols(size, new_cols)
        return ends[0], ends[1]

    def exact(
        self, atoms: npt.NDArray[np.int64], rows: npt.NDArray[np.float64]
    ) -> tuple[float | None, float | None]:
        """The exact [min, max] of a set holding ``rows[i]`` rows of atom ``atoms[i]``:
        by its atom's interval when it lies in one (shared by every set in that atom),
        else by :meth:`split`."""
        if atoms.size == 0:
            return 0.0, 0.0
        if atoms.size > 1:
            return self.split(atoms, rows)
        low, high = self.interval(int(atoms[0]))
        if low is None or high is None:
            return None, None
        # the atom's exact solves left points at both ends of its interval
        return self.reach(atoms, rows)

    @property
    def found(self) -> int:
        """Feasible points found so far (``reach`` may start after some)."""
        return self._count

    def push(self, up: npt.NDArray[np.int64], down: npt.NDArray[np.int64], rng: np.random.Generator) -> bool:
        """One solve pushing the totals of ``up`` up and of ``down`` down together (random
        positive weights, so that successive pushes trade atoms off differently): a
        feasible point at which many open sets reach an end at once. False if the solve
        fails."""
        highs = self._highs
        columns = np.concatenate([up, down]).astype(np.int32)
        if not columns.size:
            return True
        weights = rng.uniform(1.0, 2.0, size=columns.size)
        weights[: up.size] *= -1.0  # minimised: up atoms enter with a negative cost
        highs.changeColsCost(columns.size, columns, weights)
        highs.changeObjectiveSense(highspy.ObjSense.kMinimize)
        highs.run()
        solved = highs.getModelStatus() == highspy.HighsModelStatus.kOptimal
        if solved:
            self._add_point(np.asarray(highs.getSolution().col_value, dtype=np.float64)[: self._rows.size])
        highs.changeColsCost(columns.size, columns, np.zeros(columns.size))
        return solved

    def spread(self, atoms: npt.NDArray[np.int64]) -> None:
        """Two solves that push the total of ``atoms`` together down, then up: feasible
        points at which many of them sit near their own ends at once (see :meth:`reach`)."""
        if atoms.size:
            self._solve(atoms)

    def points(self) -> npt.NDArray[np.float64]:
        """Every feasible point found so far (atom totals, one row each)."""
        return self._points[: self._count]

    def add_points(self, points: npt.NDArray[np.float64]) -> int:
        """Take the rows of ``points`` that satisfy every released SUM and every atom's
        box (within round-off, as the solver's own points do); returns how many. Points
        from elsewhere (``carry.py``) are checked here, so a wrong one is never used."""
        if not points.size or points.shape[1] != self._rows.size:
            return 0
        scale = 1e-6 * np.maximum(1.0, np.abs(self._totals))
        residual = np.abs(self._matrix @ points.T - self._totals[:, None])
        box = 1e-6 * np.maximum(1.0, self._rows * max(abs(self._bounds[0]), abs(self._bounds[1])))
        feasible = (
            (residual <= scale[:, None]).all(axis=0)
            & (points >= self._rows * self._bounds[0] - box).all(axis=1)
            & (points <= self._rows * self._bounds[1] + box).all(axis=1)
        )
        for point in points[feasible]:
            self._add_point(point)
        return int(feasible.sum())

    def _add_point(self, point: npt.NDArray[np.float64]) -> None:
        if self._count == len(self._points):
            grown = np.empty((max(8, 2 * self._count), self._points.shape[1]), dtype=np.float64)
            grown[: self._count] = self._points[: self._count]
            self._points = grown
        self._points[self._count] = point
        self._count += 1

    def _solve(self, atoms: npt.NDArray[np.int64]) -> list[float | None]:
        highs = self._highs
        highs.changeColsCost(atoms.size, atoms.astype(np.int32), np.ones(atoms.size))
        ends = both_ends(highs, self._add_point)
        highs.changeColsCost(atoms.size, atoms.astype(np.int32), np.zeros(atoms.size))
        return ends
