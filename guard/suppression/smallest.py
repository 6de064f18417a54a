"""The smallest deviation that moves one cell by a level: one HiGHS model, kept.

A proof of a requirement against insiders needs deviations that leave their cells in
place (:mod:`~guard.suppression.standing`). A plain feasibility LP returns a vertex with
every movable cell at one of its bounds: a deviation through almost every cell, so
through almost every insider, and the proof has to split the insiders down to single
ones, each split changing the bounds of hundreds of columns (the solver's warm start
is lost: seconds per LP on a 4,000-cell view).

Here a deviation is split into its rise and fall (``d = u - v``, both >= 0) and the LP
minimises ``sum(u + v)``: its optimum moves as few cells as the relations allow (on
two crossed margins, the four corners of a rectangle). Such a deviation passes through
few insiders, so the next proof needs to avoid only those, and fixing them at zero
leaves the kept basis feasible for most solves (they sit at zero already): each
re-solve is a few dual simplex steps from the last optimum, whose costs never change.
"""

from __future__ import annotations

from collections.abc import Set

import highspy
import numpy as np
from scipy import sparse

from guard.highs import lp_model
from guard.suppression.table import Table

__all__ = ["MAX_ITERATIONS", "SmallestDeviation"]

#: simplex iterations one solve may take; a solve stopped there finds nothing (the
#: requirement then stays unproven: fail closed). A count, not a clock, so a proof does
#: not depend on the machine's load
MAX_ITERATIONS = 20_000


class SmallestDeviation:
    """``min sum(c (u + v))`` s.t. ``A (u - v) = 0``, ``0 <= u <= ub - a``,
    ``0 <= v <= a - lb`` on movable cells (0 elsewhere) and one cell's move fixed; ``c``
    is 1 (the least total move) unless costs are given (the cheapest deviation of the
    heuristic: a cell's cost of being withheld, 0 once it is)."""

    def __init__(self, table: Table, movable: Set[int], costs: np.ndarray | None = None) -> None:
        a, lb, ub = table.arrays
        self._rise = ub - a
        self._fall = a - lb
        n = len(table)
        self._n = n
        self._base = np.zeros(n, dtype=bool)
        self._base[list(movable)] = True
        self._movable = self._base.copy()
        self._cells = frozenset(int(i) for i in np.flatnonzero(self._base))
        matrix = sparse.hstack([table.csc, -table.csc], format="csc")
        rows = np.zeros(matrix.shape[0])
        upper = np.concatenate(
            [np.where(self._movable, self._rise, 0.0), np.where(self._movable, self._fall, 0.0)]
        )
        # costs as a share of the largest: HiGHS reports numerical trouble on
        # magnitude-weighted costs (1e9 next to 0), and the optimum is the same
        self._scale = 1.0 if costs is None else max(float(np.max(costs, initial=0.0)), 1e-300)
        unit = np.ones(n) if costs is None else np.asarray(costs, dtype=np.float64) / self._scale
        self._highs = lp_model(matrix, np.concatenate([unit, unit]), np.zeros(2 * n), upper, rows, rows)
        self._highs.setOptionValue("simplex_iteration_limit", MAX_ITERATIONS)
        # the optimum of "move nothing" (every column at zero: the slack basis) is dual
        # feasible whatever the bounds: each solve starts from it. The last solve's
        # optimum would not be (the cell it fixed is free again), and a re-solve from
        # there took ten times the pivots
        self._highs.run()
        self._start = self._highs.getBasis()
        self.solved = 0
        #: simplex iterations of every solve so far
        self.iterations = 0

    def price(self, cells: np.ndarray, cost: float) -> None:
        """Moving ``cells`` costs ``cost`` per unit from now on (costs stay >= 0, so the
        starting basis stays dual feasible)."""
        columns = np.concatenate([cells, cells + self._n]).astype(np.int32)
        self._highs.changeColsCost(len(columns), columns, np.full(len(columns), cost / self._scale))

    def movable(self, avoid: Set[int]) -> frozenset[int]:
        """The cells a deviation may move: the movable ones but ``avoid``."""
        return self._cells - frozenset(avoid)

    def solve(self, p: int, move: float, avoid: Set[int]) -> np.ndarray | None:
        """The deviation of least total move that moves ``p`` by exactly ``move`` and no
        cell outside the movable ones or in ``avoid``; None when there is none (``p``
        itself cannot move so far, or the relations forbid it) or the iteration limit
        stopped the solver."""
        self._restrict(avoid)
        n = self._n
        rise, fall = (move, 0.0) if move > 0 else (0.0, -move)
        if not self._movable[p] or rise > self._rise[p] or fall > self._fall[p]:
            return None  # the cell itself cannot move that far (or at all)
        self._highs.changeColsBounds(
            2, np.array([p, n + p], dtype=np.int32), np.array([rise, fall]), np.array([rise, fall])
        )
        self._highs.setBasis(self._start)
        self._highs.run()
        self.solved += 1
        self.iterations += max(0, self._highs.getInfo().simplex_iteration_count)
        found = None
        if self._highs.getModelStatus() == highspy.HighsModelStatus.kOptimal:
            x = np.asarray(self._highs.getSolution().col_value, dtype=np.float64)
            found = x[:n] - x[n:]
        up, down = self._room(np.array([p]))
        self._highs.changeColsBounds(
            2, np.array([p, n + p], dtype=np.int32), np.zeros(2), np.array([up[0], down[0]])
        )
        return found

    def _restrict(self, avoid: Set[int]) -> None:
        target = self._base.copy()
        if avoid:
            target[list(avoid)] = False
        changed = np.flatnonzero(target != self._movable).astype(np.int32)
        if len(changed):
            self._movable = target
            up, down = self._room(changed)
            n = self._n
            columns = np.concatenate([changed, changed + n]).astype(np.int32)
            self._highs.changeColsBounds(
                len(columns), columns, np.zeros(len(columns)), np.concatenate([up, down])
            )

    def _room(self, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        movable = self._movable[cells]
        return np.where(movable, self._rise[cells], 0.0), np.where(movable, self._fall[cells], 0.0)
