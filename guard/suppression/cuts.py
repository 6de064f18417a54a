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
when the loop stops first. Online the loop stops on *work*, not on the clock: a budget
of simplex iterations over every LP it solves (attacker LPs, the master's relaxations
and MILPs, as HiGHS counts them) and a node limit per master MILP, so one input with
one secret gives one pattern whatever the machine's load (the wall clock,
``time_limit``, is a fail-safe only, for a machine far slower than the budget assumes).
Online, each master MILP may stop within a loose gap (5 %):
rounds get several times cheaper, and the first complete pattern is within that gap of
the optimum; the loop then goes on at the proof's gap. A level is checked against the
deviations that reached it at earlier points before its LP is solved (most levels stay
reached from round to round). HiGHS 1.16 can report the optimum of a MIP given a start
but return the start as its solution; the master checks that the vector costs what is
reported and solves again without the start when not (before, the loop stopped at once
with the start, "proven").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Set
from dataclasses import dataclass, replace

import highspy
import numpy as np
from scipy import sparse

from guard.highs import lp_model
from guard.suppression.bridges import bridge_rows
from guard.suppression.budget import Budget
from guard.suppression.model import Levels, level_blocks
from guard.suppression.table import Table

__all__ = ["PROOF_GAP", "CutOutcome", "solve_by_cuts"]

#: relative shortfall below which a level counts as reached (the certificates decide)
_TOL = 1e-7
#: deviations kept per level to try at later points before solving its LP
_POOL = 4
#: relative rise of the LP bound over 3 rounds below which the LP rounds stop
_TAIL = 1e-3
#: the master's relative gap for a proof of optimality (HiGHS's default)
PROOF_GAP = 1e-4


def _within(d: np.ndarray, upper: np.ndarray, lower: np.ndarray) -> bool:
    """Whether ``-lower <= d <= upper`` (the attacker LP's bounds at a point), with the
    LP's own slack: ``d`` is then as good as the LP's optimum for reaching the level
    (the certificates check the final pattern's deviations exactly)."""
    slack = 1e-9 * max(1.0, float(np.abs(d).max(initial=0.0)))
    return bool(np.all(d <= upper + slack) and np.all(-d <= lower + slack))


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
    #: the fail-safe clock stopped the loop: the outcome depends on the load
    timed_out: bool = False


def solve_by_cuts(
    table: Table,
    levels: Levels,
    costs: np.ndarray,
    *,
    forced: Set[int] = frozenset(),
    kept: Set[int] = frozenset(),
    start: Set[int] = frozenset(),
    time_limit: float = 10.0,
    iterations: int | None = None,
    nodes: int | None = None,
    gap: float = PROOF_GAP,
    each: Callable[[CutOutcome], None] | None = None,
    bridges: bool = True,
    checks: int | None = None,
) -> CutOutcome | None:
    """Cut loop within ``iterations`` simplex iterations (None: no limit) and
    ``time_limit`` seconds, the master MILP started from the pattern ``start`` when it
    satisfies the cuts. An incomplete outcome when the budget ran out with a pattern
    that misses some levels (the caller may complete it) or before any (empty
    ``suppressed``).

    ``iterations`` and ``nodes`` (branch-and-bound nodes per master MILP; None: no
    limit) bound the work: with both set and the clock not reached, the outcome is a
    function of the input alone. ``time_limit`` is then a fail-safe.

    ``gap``: relative gap at which each master MILP may stop. A loose gap (e.g. 0.05)
    makes each round much cheaper, and the cuts at a near-optimal point serve as well
    as at the optimum; the first pattern that reaches every level is then within
    ``gap`` of the optimum, and is kept while the loop goes on at :data:`PROOF_GAP`
    (returned, with the latest bound, when time runs out).

    ``each``: called with every master pattern that misses some levels (and the
    deviations of the levels it reaches) before the next round, e.g. to complete it.

    ``bridges``: the master starts with :func:`~guard.suppression.bridges.bridge_rows`
    (no withheld cell alone in a relation), which keep an optimal pattern and cut off
    master patterns no deviation can use.

    ``checks``: a limit on the master MILPs' work inside HiGHS, in its MIP checks over
    the whole loop (:class:`~guard.suppression.budget.Budget`; None: none). With it a
    master's root cannot run on until the clock stops it.

    ``timed_out`` in the outcome: the clock, not the work, stopped the loop."""
    budget = Budget(time.perf_counter() + time_limit, iterations, checks)
    outcome = _loop(table, levels, costs, forced, kept, start, budget, nodes, gap, each, bridges)
    return replace(outcome, timed_out=budget.timed_out)


def _loop(
    table: Table,
    levels: Levels,
    costs: np.ndarray,
    forced: Set[int],
    kept: Set[int],
    start: Set[int],
    budget: Budget,
    nodes: int | None,
    gap: float,
    each: Callable[[CutOutcome], None] | None,
    bridges: bool,
) -> CutOutcome:
    """The loop of :func:`solve_by_cuts` within ``budget``."""
    a, lb, ub = table.arrays
    n = len(a)
    attacker = _Attacker(table, budget)
    lo = np.zeros(n)
    hi = np.ones(n)
    lo[list(set(levels) | set(forced))] = 1.0
    hi[list(kept)] = 0.0
    blocks = level_blocks(levels)
    rooms = {p: (np.minimum(ub - a, max(lv)), np.minimum(a - lb, max(lv))) for p, lv in levels.items()}
    rows = bridge_rows(table, levels, forced, kept) if bridges else None
    master = _Master(costs, (lo, hi), max(gap, PROOF_GAP), budget, nodes, rows)
    guess = np.zeros(n)
    guess[list(start)] = 1.0
    #: per level, the last deviations that reached it (tried before its LP)
    pool: dict[tuple[int, bool], list[np.ndarray]] = {}

    def separate(y: np.ndarray) -> tuple[int, dict[tuple[int, bool], np.ndarray]]:
        """Add the cuts ``y`` violates; the deviations of the levels it reaches."""
        added = 0
        found: dict[tuple[int, bool], np.ndarray] = {}
        for p, level, upward in blocks:
            if budget.spent():
                break  # what was found stands; the caller completes the rest
            up, down = rooms[p]
            known = next((d for d in pool.get((p, upward), ()) if _within(d, up * y, down * y)), None)
            if known is not None:
                # a deviation found before still fits: the level is reached, no LP
                found[(p, upward)] = known
                continue
            d, g = attacker.solve(y, up, down, p, upward)
            if d is not None and (d[p] if upward else -d[p]) >= level * (1 - _TOL):
                found[(p, upward)] = d
                recent = pool.setdefault((p, upward), [])
                recent.insert(0, d)
                del recent[_POOL:]
            elif g is not None and g @ y < level * (1 - _TOL):
                master.add(g, level)
                added += 1
        return added, found

    def result(last: CutOutcome, best: CutOutcome | None) -> CutOutcome:
        """Out of time or failed: the complete pattern of a loose round when there is
        one (with the latest bound: every bound found holds), else the last."""
        if best is None:
            return last
        return CutOutcome(best.suppressed, True, False, max(best.bound, last.bound), best.deviations)

    last = CutOutcome(frozenset(), False, False, float(costs @ lo), {})
    best: CutOutcome | None = None
    while True:
        # the LP relaxation first, after every round too: cuts come cheaply from
        # fractional points, and each MILP solve is dear. Bounded: on 3-D tables the
        # LP rounds alone can fill the budget (35 rounds in 2 s on a 6x6x6), so they
        # stop after half the budget left, or once the bound rises by under _TAIL in
        # 3 rounds
        phase = budget.half()
        trail: list[float] = []
        while True:
            relaxed = master.solve(integral=False)
            if relaxed is None:
                return result(last, best)
            if not last.suppressed:
                last = CutOutcome(frozenset(), False, False, max(last.bound, relaxed[1]), {})
            trail.append(relaxed[1])
            tailing = len(trail) > 3 and trail[-1] - trail[-4] < _TAIL * max(1.0, abs(trail[-1]))
            if tailing or budget.spent(phase):
                break
            added, _ = separate(relaxed[0])
            if not added:
                break
        solved = master.solve(integral=True, start=guess)
        if solved is None:
            return result(last, best)
        y, bound, proven = solved
        y = np.round(y)
        added, found = separate(y)
        hidden = frozenset(int(i) for i in np.flatnonzero(y > 0.5))
        complete = len(found) == len(blocks)
        tight = master.gap <= PROOF_GAP
        last = CutOutcome(hidden, complete, proven and complete and tight, bound, found)
        if complete and not tight:
            # within the loose gap of the optimum: kept; on at the proof's gap from it
            best = last
            guess = y
            master.gap = PROOF_GAP
            continue
        if not complete and each is not None:
            each(last)
        if complete or not added:
            # reached, or a level neither reached nor cut (out of time while
            # separating, or solver trouble): the caller completes what is missing
            return last if complete else result(last, best)


class _Master:
    """``min c y`` over the cuts so far, one HiGHS model kept across rounds."""

    def __init__(
        self,
        costs: np.ndarray,
        bounds: tuple[np.ndarray, np.ndarray],
        gap: float,
        budget: Budget,
        nodes: int | None,
        rows: tuple[sparse.csr_matrix, np.ndarray] | None = None,
    ) -> None:
        lo, hi = bounds
        self._n = len(costs)
        self._costs = costs
        matrix, lower = rows if rows is not None else (sparse.csr_matrix((0, self._n)), np.empty(0))
        upper = np.full(len(lower), np.inf)
        self._highs = lp_model(matrix, costs, lo, hi, lower, upper)
        self._integral = False
        self._gap = gap
        self._budget = budget
        self._highs.setOptionValue("mip_rel_gap", float(gap))
        budget.watch(self._highs)
        if nodes is not None:
            self._highs.setOptionValue("mip_max_nodes", int(nodes))

    @property
    def gap(self) -> float:
        """The relative gap at which a MILP solve stops."""
        return self._gap

    @gap.setter
    def gap(self, value: float) -> None:
        self._gap = value
        self._highs.setOptionValue("mip_rel_gap", float(value))

    def add(self, g: np.ndarray, rhs: float) -> None:
        """The cut ``g y >= rhs``, each coefficient lowered to at most ``rhs``: for
        binary ``y`` one term of at least ``rhs`` meets it alone, so the lowered cut
        holds wherever the original does, and its LP relaxation is tighter. Zero
        coefficients are dropped (keeping every positive one keeps it valid)."""
        index = np.flatnonzero(g > 0).astype(np.int32)
        values = np.minimum(g[index], rhs).astype(np.float64)
        self._highs.addRow(float(rhs), highspy.kHighsInf, len(index), index, values)

    def _consistent(self) -> bool:
        """Whether the solution HiGHS returns costs what it reports (after a MIP)."""
        highs = self._highs
        if highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return True  # no claim to check (out of time: the dual bound is used)
        y = np.round(np.asarray(highs.getSolution().col_value, dtype=np.float64))
        cost = float(self._costs @ y)
        reported = float(highs.getInfo().objective_function_value)
        return abs(cost - reported) <= 1e-6 * max(1.0, abs(cost))

    def solve(
        self, *, integral: bool, start: np.ndarray | None = None
    ) -> tuple[np.ndarray, float, bool] | None:
        """``(y, lower bound, proven optimal)`` of the MILP (or its LP relaxation);
        None when out of budget or failed."""
        if self._budget.spent():
            return None
        highs = self._highs
        if integral != self._integral:
            kind = highspy.HighsVarType.kInteger if integral else highspy.HighsVarType.kContinuous
            highs.changeColsIntegrality(self._n, np.arange(self._n, dtype=np.int32), np.full(self._n, kind))
            self._integral = integral
        given = integral and start is not None and bool(start.any())
        if given and start is not None:
            highs.setSolution(self._n, np.arange(self._n, dtype=np.int32), start)
        self._budget.run(highs)
        if given and not self._consistent():
            # HiGHS 1.16 may report the optimum of the MIP it solved but hand back the
            # start as its solution (on 2-D tables, often: "optimal" at cost 9 with the
            # 12-cell start): solved again without it
            highs.clearSolver()
            self._budget.run(highs)
        status = highs.getModelStatus()
        info = highs.getInfo()
        proven = status == highspy.HighsModelStatus.kOptimal
        if not proven and not (integral and info.primal_solution_status):
            return None
        y = np.asarray(highs.getSolution().col_value, dtype=np.float64)
        # claim optimality only for the vector returned: its cost must be the optimum
        proven = proven and (not integral or self._consistent())
        # a MILP stopped at a loose gap is "optimal" for HiGHS: its bound is the dual one
        bound = float(info.mip_dual_bound) if integral else float(info.objective_function_value)
        return y, bound, proven


class _Attacker:
    """The attacker's LP ``max ±d_p  s.t.  A d = 0`` within bounds set per call, one
    HiGHS model over the whole table kept across calls (each re-solve starts from the
    last basis)."""

    def __init__(self, table: Table, budget: Budget) -> None:
        self._budget = budget
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
        self._budget.run(highs)
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
