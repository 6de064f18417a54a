"""Certificates: attacker deviations that prove a sensitive cell's protection.

A deviation ``d`` with ``A d = 0``, ``lb - a <= d <= ub - a`` and ``d_i = 0`` for every
published cell is a point ``a + d`` of the audit LP's feasible set (seed 004, Def. 2).
If ``d_p >= upl_p`` the audit interval of ``p`` reaches ``a_p + upl_p``; a deviation
scaled by ``0 < s`` stays a deviation when ``s * d`` remains within the bounds, and
``-d`` is one when the bounds allow. So each deviation a solver finds, checked here
exactly (up to round-off), proves protection without solving the audit LP, and may
prove it for other sensitive cells it happens to move as well. A cell published after
all (redundancy elimination) withdraws every deviation that moves it.
"""

from __future__ import annotations

from collections.abc import Set

import numpy as np
from scipy import sparse

from guard.suppression.table import Table

__all__ = ["Certificates"]

#: relative round-off accepted in ``A d = 0`` and in the bounds
_TOL = 1e-7


class Certificates:
    """Verified deviations, indexed by the cells they move."""

    def __init__(self, table: Table) -> None:
        a, lb, ub = table.arrays
        self._columns: sparse.csc_matrix = table.matrix.tocsc()
        self._up = ub - a
        self._down = a - lb
        self._found: list[tuple[np.ndarray, np.ndarray]] = []
        self._by_cell: dict[int, list[int]] = {}
        #: deviations through a cell published after all (they prove nothing any more)
        self._withdrawn: set[int] = set()

    def add(self, cells: np.ndarray, deviation: np.ndarray, hidden: Set[int]) -> bool:
        """Keep the deviation ``deviation[k]`` of cell ``cells[k]`` if it is valid for the
        withheld cells ``hidden``; entries below round-off are dropped. Returns whether
        it was kept."""
        scale = float(np.abs(deviation).max(initial=0.0))
        if scale == 0:
            return False
        mask = np.abs(deviation) > 1e-9 * max(1.0, scale)
        support = np.asarray(cells)[mask]
        values = deviation[mask]
        order = np.argsort(support)
        support, values = support[order], values[order]
        tol = _TOL * max(1.0, scale)
        if not all(int(i) in hidden for i in support):
            return False
        if np.any(values > self._up[support] + tol) or np.any(-values > self._down[support] + tol):
            return False
        residual = self._columns[:, support] @ values
        if np.abs(residual).max(initial=0.0) > tol:
            return False
        for i in support:
            self._by_cell.setdefault(int(i), []).append(len(self._found))
        self._found.append((support, values))
        return True

    def covers(self, p: int, level: float, upward: bool, *, avoid: int | None = None) -> bool:
        """Whether a kept deviation, scaled to move ``p`` by ``level`` up (or down), stays
        within every cell's bounds: then ``p``'s audit interval reaches that far.
        ``avoid``: only deviations that leave this cell alone count (would ``p`` stay
        covered if it were published)."""
        return level <= 0 or self.witness(p, level, upward, avoid=avoid) is not None

    def witness(self, p: int, level: float, upward: bool, *, avoid: int | None = None) -> int | None:
        """Number of a kept deviation that :meth:`covers` ``p`` by ``level``, or None."""
        slack = _TOL * max(1.0, level)
        through = set(self._by_cell.get(avoid, ())) if avoid is not None else set()
        for k in self._by_cell.get(p, ()):
            if k in self._withdrawn or k in through:
                continue
            support, values = self._found[k]
            at_p = float(values[np.searchsorted(support, p)])
            scaled = values * ((level if upward else -level) / at_p)
            if np.all(scaled <= self._up[support] + slack) and np.all(-scaled <= self._down[support] + slack):
                return k
        return None

    def moves(self, k: int) -> np.ndarray:
        """The cells deviation number ``k`` moves (sorted)."""
        return self._found[k][0]

    def withdraw(self, cell: int) -> None:
        """``cell`` is published after all: the deviations that move it prove nothing."""
        self._withdrawn.update(self._by_cell.get(cell, ()))

    def proven(self, p: int, levels: tuple[float, float]) -> bool:
        """Both of ``p``'s protection levels ``(upper, lower)`` are covered."""
        upper, lower = levels
        return self.covers(p, upper, True) and self.covers(p, lower, False)
