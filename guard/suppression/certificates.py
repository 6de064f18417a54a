"""Certificates: attacker deviations that prove a sensitive cell's protection.

A deviation ``d`` with ``A d = 0``, ``lb - a <= d <= ub - a`` and ``d_i = 0`` for every
published cell is a point ``a + d`` of the audit LP's feasible set (seed 004, Def. 2).
If ``d_p >= upl_p`` the audit interval of ``p`` reaches ``a_p + upl_p``; a deviation
scaled by ``0 < s`` stays a deviation when ``s * d`` remains within the bounds, and
``-d`` is one when the bounds allow. So each deviation a solver finds, checked here
exactly (up to round-off), proves protection without solving the audit LP, and may
prove it for other sensitive cells it happens to move as well.
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

    def covers(self, p: int, level: float, upward: bool, avoid: np.ndarray | None = None) -> bool:
        """Whether a kept deviation, scaled to move ``p`` by ``level`` up (or down), stays
        within every cell's bounds: then ``p``'s audit interval reaches that far.

        ``avoid``: only deviations that move none of these cells count (e.g. an
        insider's own cells, which she knows: a deviation that leaves them in place is
        one she cannot rule out either)."""
        if level <= 0:
            return True
        slack = _TOL * max(1.0, level)
        for k in self._by_cell.get(p, ()):
            support, values = self._found[k]
            if avoid is not None and _meets(support, avoid):
                continue
            at_p = float(values[np.searchsorted(support, p)])
            scaled = values * ((level if upward else -level) / at_p)
            if np.all(scaled <= self._up[support] + slack) and np.all(-scaled <= self._down[support] + slack):
                return True
        return False

    def proven(self, p: int, levels: tuple[float, float], avoid: np.ndarray | None = None) -> bool:
        """Both of ``p``'s protection levels ``(upper, lower)`` are covered (by
        deviations that leave ``avoid`` in place, see :meth:`covers`)."""
        upper, lower = levels
        return self.covers(p, upper, True, avoid) and self.covers(p, lower, False, avoid)

    def inside(self, hidden: Set[int]) -> Certificates:
        """The deviations that move only cells of ``hidden``: proofs for any pattern
        that withholds at least ``hidden``."""
        mask = np.zeros(len(self._up), dtype=bool)
        mask[list(hidden)] = True
        kept = Certificates.__new__(Certificates)
        kept._columns, kept._up, kept._down = self._columns, self._up, self._down
        kept._found, kept._by_cell = [], {}
        for support, values in self._found:
            if mask[support].all():
                for i in support:
                    kept._by_cell.setdefault(int(i), []).append(len(kept._found))
                kept._found.append((support, values))
        return kept


def _meets(support: np.ndarray, cells: np.ndarray) -> bool:
    """Whether sorted ``support`` holds any of ``cells``."""
    at = np.searchsorted(support, cells)
    inside = at < len(support)
    return bool(np.any(support[at[inside]] == cells[inside]))
