"""The CSP MILP by capacity cuts (Fischetti & Salazar's decomposition), for tables too
large for the full model of :mod:`~guard.suppression.optimal`.

The full model carries a copy of the table per sensitive cell and direction. Here the
master problem keeps only the choice ``y_i in {0, 1}``::

    min Σ_i c_i y_i   s.t.  Σ_i g_i y_i >= L   for every cut found so far

and each sensitive cell ``p`` and direction is checked at the master's ``y*`` by the
attacker's LP ``max ±d_p  s.t.  A d = 0,  -D_i y*_i <= d_i <= U_i y*_i`` (``U``, ``D``
the rooms capped at ``p``'s largest level, as in the full model). For any multipliers
``λ`` of ``A d = 0`` weak duality gives, for every ``y``::

    max ±d_p  <=  Σ_i y_i (D_i r_i^+ + U_i r_i^-),   r = ±e_p - A^T λ  (reduced costs)

so when the LP's optimum misses the level ``L`` its duals give a *capacity cut*
``Σ_i g_i y_i >= L`` that ``y*`` violates and every protecting pattern satisfies (a cut
from any ``λ`` is valid; round-off can only make it weaker). The LP relaxation of the
master is cut first (cheap), then the master MILP (HiGHS) is re-solved with the cuts
until its pattern protects every level; that pattern is optimal for the capped model,
and the master's bound is a lower bound throughout. Each level's LP optimum at the
final pattern is an attacker deviation reaching it: the certificates of the pattern.

Started from a known protecting pattern (the heuristic's), whose cost is the incumbent
when time runs out first.
"""

from __future__ import annotations

import time
from collections.abc import Set
from dataclasses import dataclass

import highspy
import numpy as np
from scipy import sparse

from guard.highs import lp_model
from guard.suppression.model import Levels, level_blocks
from guard.suppression.table import Table

__all__ = ["CutOutcome", "solve_by_cuts"]

#: relative shortfall below which a level counts as reached (the certificates decide)
_TOL = 1e-7


@dataclass(frozen=True)
class CutOutcome:
    """The master's last pattern; whether it reaches every level (``complete``) and is
    proven optimal for the capped model; the master's lower bound on the cost; and per
    (sensitive cell, upward) the deviation reaching that level within the pattern (only
    the levels it reaches when not ``complete``)."""

    #: empty when time ran out before a first integer pattern (``bound`` is then the
    #: LP relaxation's over the cuts found)
    suppressed: frozenset[int]
    complete: bool
    proven: bool
    bound: float
    deviations: dict[tuple[int, bool], np.ndarray]


def solve_by_cuts(
    table: Table,
    levels: Levels,
    costs: np.ndarray,
    *,
    forced: Set[int] = frozenset(),
    kept: Set[int] = frozenset(),
    start: Set[int] = frozenset(),
    time_limit: float = 10.0,
) -> CutOutcome | None:
    """Cut loop within ``time_limit`` seconds, the master MILP started from the pattern
    ``start`` when it satisfies the cuts. None when the solver failed; an incomplete
    outcome when time ran out with a pattern that misses some levels (the caller may
    complete it) or before any (empty ``suppressed``)."""
    deadline = time.perf_counter() + time_limit
    a, lb, ub = table.arrays
    n = len(a)
    attacker = _Attacker(table)
    lo = np.zeros(n)
    hi = np.ones(n)
    lo[list(set(levels) | set(forced))] = 1.0
    hi[list(kept)] = 0.0
    blocks = level_blocks(levels)
    rooms = {p: (np.minimum(ub - a, max(lv)), np.minimum(a - lb, max(lv))) for p, lv in levels.items()}
    master = _Master(costs, lo, hi)
    guess = np.zeros(n)
    guess[list(start)] = 1.0

    def separate(y: np.ndarray) -> tuple[int, dict[tuple[int, bool], np.ndarray]]:
        """Add the cuts ``y`` violates; the deviations of the levels it reaches."""
        added = 0
        found: dict[tuple[int, bool], np.ndarray] = {}
        for p, level, upward in blocks:
            if time.perf_counter() > deadline:
                break  # what was found stands; the caller completes the rest
            up, down = rooms[p]
            d, g = attacker.solve(y, up, down, p, upward)
            if d is not None and (d[p] if upward else -d[p]) >= level * (1 - _TOL):
                found[(p, upward)] = d
            elif g is not None and g @ y < level * (1 - _TOL):
                master.add(g, level)
                added += 1
        return added, found

    last = CutOutcome(frozenset(), False, False, float(costs @ lo), {})
    while True:
        # the LP relaxation first, after every round too: cuts come cheaply from
        # fractional points, and each MILP solve is dear
        while True:
            relaxed = master.solve(integral=False, seconds=deadline - time.perf_counter())
            if relaxed is None:
                return last
            if not last.suppressed:
                last = CutOutcome(frozenset(), False, False, max(last.bound, relaxed[1]), {})
            added, _ = separate(relaxed[0])
            if not added:
                break
        solved = master.solve(integral=True, seconds=deadline - time.perf_counter(), start=guess)
        if solved is None:
            return last
        y, bound, proven = solved
        y = np.round(y)
        added, found = separate(y)
        hidden = frozenset(int(i) for i in np.flatnonzero(y > 0.5))
        complete = len(found) == len(blocks)
        last = CutOutcome(hidden, complete, proven and complete, bound, found)
        if complete or not added:
            # reached, or a level neither reached nor cut (solver trouble): the caller
            # completes what is missing
            return last


class _Master:
    """``min c y`` over the cuts so far, one HiGHS model kept across rounds."""

    def __init__(self, costs: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        self._n = len(costs)
        empty = np.empty(0)
        self._highs = lp_model(sparse.csc_matrix((0, self._n)), costs, lo, hi, empty, empty)
        self._highs.setOptionValue("mip_rel_gap", 1e-4)
        self._integral = False

    def add(self, g: np.ndarray, rhs: float) -> None:
        """The cut ``g y >= rhs`` (only its zero coefficients dropped: keeping every
        positive one keeps it valid)."""
        index = np.flatnonzero(g > 0).astype(np.int32)
        self._highs.addRow(float(rhs), highspy.kHighsInf, len(index), index, g[index].astype(np.float64))

    def solve(
        self, *, integral: bool, seconds: float, start: np.ndarray | None = None
    ) -> tuple[np.ndarray, float, bool] | None:
        """``(y, lower bound, proven optimal)`` of the MILP (or its LP relaxation);
        None when out of time or failed."""
        if seconds <= 0:
            return None
        highs = self._highs
        if integral != self._integral:
            kind = highspy.HighsVarType.kInteger if integral else highspy.HighsVarType.kContinuous
            highs.changeColsIntegrality(self._n, np.arange(self._n, dtype=np.int32), np.full(self._n, kind))
            self._integral = integral
        # HiGHS counts its limit on the instance's clock, which runs on across solves
        highs.setOptionValue("time_limit", float(highs.getRunTime()) + float(seconds))
        if integral and start is not None and start.any():
            highs.setSolution(self._n, np.arange(self._n, dtype=np.int32), start)
        highs.run()
        status = highs.getModelStatus()
        info = highs.getInfo()
        proven = status == highspy.HighsModelStatus.kOptimal
        if not proven and not (integral and info.primal_solution_status):
            return None
        y = np.asarray(highs.getSolution().col_value, dtype=np.float64)
        bound = float(info.objective_function_value) if not integral or proven else float(info.mip_dual_bound)
        return y, bound, proven


class _Attacker:
    """The attacker's LP ``max ±d_p  s.t.  A d = 0`` within bounds set per call, one
    HiGHS model over the whole table kept across calls (each re-solve starts from the
    last basis)."""

    def __init__(self, table: Table) -> None:
        matrix = table.csc
        self._csr: sparse.csr_matrix = table.matrix.tocsr()
        self._n = matrix.shape[1]
        zeros = np.zeros(self._n)
        rows = np.zeros(matrix.shape[0])
        self._highs = lp_model(matrix, zeros, zeros, zeros, rows, rows)
        self._all = np.arange(self._n, dtype=np.int32)
        self._cost_at: int | None = None

    def solve(
        self, y: np.ndarray, up: np.ndarray, down: np.ndarray, p: int, upward: bool
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """At ``y``: the optimal deviation (None if the LP failed) and the cut
        coefficients ``g`` from its duals (None if it failed)."""
        highs = self._highs
        sign = 1.0 if upward else -1.0
        if self._cost_at is not None:
            highs.changeColCost(self._cost_at, 0.0)
        highs.changeColCost(p, -sign)  # minimise -sign * d_p
        self._cost_at = p
        highs.changeColsBounds(self._n, self._all, -down * y, up * y)
        highs.run()
        if highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None, None
        solution = highs.getSolution()
        d = np.asarray(solution.col_value, dtype=np.float64)
        lam = np.asarray(solution.row_dual, dtype=np.float64)
        cost = np.zeros(self._n)
        cost[p] = -sign
        reduced = cost - self._csr.T @ lam
        # max sign*d_p = -min(c d) <= Σ_i y_i (U_i max(-r_i, 0) + D_i max(r_i, 0)) for any λ
        g = up * np.maximum(-reduced, 0.0) + down * np.maximum(reduced, 0.0)
        return d, g
