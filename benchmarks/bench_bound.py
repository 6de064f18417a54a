"""Offline lower bounds on the fewest cells that protect a table (not the online path).

For the tables of :mod:`benchmarks.bench_optimality` (same generator, same rules): the
capacity-cut (Benders, Fischetti-Salazar 2001) master ``min sum y  s.t.  g y >= level``
over the cuts found so far, solved as a MILP by HiGHS with a long time limit, round
after round. Every cut holds for every protecting pattern, so the master is a
relaxation of the problem: its optimum, and HiGHS's proven dual bound when a solve
stops on time, is a **valid lower bound** on the cell count. Which of the two each
bound is, is reported (``kind``: ``master optimum`` or ``master dual bound``).

Protection is the LP audit's (:mod:`guard.suppression.audit`), not a capped model: for
a sensitive cell ``p`` and its upper level, a pattern ``y`` protects it iff some ``d``
with ``A d = 0``, ``d_p >= level``, ``-(a - lb) y <= d <= (ub - a) y`` exists (the
attacker's interval reaches ``a_p + level``; the lower level likewise). ``d_p`` may be
capped at the level (scaling a deviation towards 0 keeps it within the box), so the
LP is bounded although ``ub = +inf``. For any row duals ``lambda`` with reduced costs
``r`` weak duality gives ``level <= sum_i y_i g_i`` with
``g_i = (ub_i - a_i) max(-r_i, 0) + (a_i - lb_i) max(r_i, 0)`` (an infinite ``g_i``, and
any above the level, lowered to the level: one such cell alone meets the cut). At a
binary point the exact LP either reaches the level or its duals give a violated cut;
at fractional points the duals of the LP capped at the level (``--cap``-style, cheaper
and more informative) are tried, and their cut is kept only when it is violated with
the uncapped coefficients. With ``--cap 1`` the rooms are capped at the cell's largest
level as the guard's own model does (bench_optimality's ``cap``): a bound on that
model only, which can be higher than the audit's optimum.

Two more families of rows (session 17), each keeping the master's optimum at most the
fewest cells: the **bridge rows** of :mod:`guard.suppression.bridges` (a withheld cell
alone in a relation is pinned, so an optimal pattern has none; a sensitive cell never is
alone), and per cut a **cardinality row** ``sum_{i in supp g} y_i >= k``, ``k`` the
fewest of its coefficients reaching the level (every binary point meeting the cut meets
it). ``--no-bridges`` / ``--no-covers`` leave them out; ``--repair K`` adds up to K more
cuts per level missed at an integer point (each from an LP's duals: valid anywhere).
A master pattern that reaches every level and passes the guard's LP audit
(``failures``) is protecting, so when it is the master's optimum the optimum is proven
(event ``proven``).

    nice -n 10 python -u benchmarks/bench_bound.py --case 8x8x8 --seed 0 --minutes 18 \\
        --out /tmp/s16-3d/bound-8x8x8-0.jsonl

Each line of ``--out`` is one event (the guard's pattern, each MILP round's bound),
written as it comes, so a stopped run still leaves its best bound.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import highspy
import numpy as np

from benchmarks.bench_optimality import make_case
from guard.highs import lp_model
from guard.suppression import SuppressionOptions, Weight, failures, required_levels, suppress
from guard.suppression.model import level_blocks
from guard.suppression.table import Table

_TOL = 1e-7
#: seconds per attacker LP and per master LP relaxation
_LP_SECONDS = 60.0
#: integer points of a master MILP's search separated besides its last one
_MORE_POINTS = 10


class _Separator:
    """Per level, the attacker's LP at a pattern, and the cut from its duals."""

    def __init__(self, table: Table, levels: dict[int, tuple[float, float]], cap: float | None) -> None:
        a, lb, ub = table.arrays
        self.n = len(a)
        self.up = ub - a
        self.down = a - lb
        self.cap = cap
        self.levels = levels
        matrix = table.csc
        self.csr = table.matrix.tocsr()
        zeros = np.zeros(self.n)
        rows = np.zeros(matrix.shape[0])
        self.highs = lp_model(matrix, zeros, zeros, zeros, rows, rows)
        self.all = np.arange(self.n, dtype=np.int32)
        self.lps = 0
        self.failed = 0
        #: wall seconds in the attacker LPs (where a slow round's time went)
        self.seconds = 0.0

    def rooms(self, p: int, upward: bool, level: float, capped: bool) -> tuple[np.ndarray, np.ndarray]:
        up, down = self.up.copy(), self.down.copy()
        if capped or self.cap is not None:
            limit = (self.cap or 1.0) * max(self.levels[p])
            up, down = np.minimum(up, limit), np.minimum(down, limit)
        # the target's own deviation capped at the level: keeps the LP bounded
        if upward:
            up[p] = min(up[p], level)
        else:
            down[p] = min(down[p], level)
        return up, down

    def cut(
        self, y: np.ndarray, p: int, level: float, upward: bool, *, binary: bool
    ) -> tuple[bool, np.ndarray | None]:
        """``(reached, g)``: whether ``y`` reaches the level (exact at a binary ``y``),
        else a cut ``g y >= level`` that ``y`` violates (None when none was found)."""
        up, down = self.rooms(p, upward, level, capped=not binary)
        lo = np.where(y > 0, -down * np.where(y > 0, y, 1.0), 0.0)
        hi = np.where(y > 0, up * np.where(y > 0, y, 1.0), 0.0)
        sign = 1.0 if upward else -1.0
        cost = np.zeros(self.n)
        cost[p] = -sign
        h = self.highs
        h.changeColsCost(self.n, self.all, cost)
        h.changeColsBounds(self.n, self.all, lo, hi)
        # bounded in time (one LP ran for minutes on a 6 x 6 x 6 table at load 9): a
        # level whose LP fails is neither reached nor cut (the bound only weakens)
        h.setOptionValue("time_limit", float(h.getRunTime()) + _LP_SECONDS)
        t0 = time.perf_counter()
        h.run()
        self.seconds += time.perf_counter() - t0
        self.lps += 1
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            h.clearSolver()
            h.setOptionValue("time_limit", float(h.getRunTime()) + _LP_SECONDS)
            h.run()
            if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
                self.failed += 1
                return False, None
        sol = h.getSolution()
        d = np.asarray(sol.col_value)
        if sign * d[p] >= level * (1 - _TOL) and binary:
            return True, None
        lam = np.asarray(sol.row_dual)
        r = cost - self.csr.T @ lam
        # the cut with the uncapped rooms (or --cap's), valid for every pattern
        up, down = self.rooms(p, upward, level, capped=False)
        with np.errstate(invalid="ignore"):
            g = np.where(r < 0, up * np.maximum(-r, 0.0), 0.0) + np.where(
                r > 0, down * np.maximum(r, 0.0), 0.0
            )
        g = np.minimum(g, level)
        if g @ y < level * (1 - 1e-6):
            return False, g
        return bool(sign * d[p] >= level * (1 - _TOL)), None


def add_bridges(master: highspy.Highs, table: Table, sensitive: set[int]) -> int:
    """Add ``y_i <= sum_{j in R, j != i} y_j`` per relation ``R`` and cell ``i`` of it.

    Valid for the optimum, not for every pattern: a withheld cell alone in a relation
    (every other cell of it published) is pinned by that relation in every attacker
    LP (``d_i = 0``), so publishing it leaves every feasibility interval as it was; an
    optimal pattern under positive costs therefore has no such cell, and the master
    with these rows still admits it. A sensitive cell (``y = 1`` fixed) gets the row
    ``sum_{j in R, j != p} y_j >= 1``. Returns the number of rows added.
    """
    rows = 0
    for cells in table.relation_cells:
        for i in cells:
            others = [j for j in cells if j != i]
            if i in sensitive:
                index = np.array(others, dtype=np.int32)
                master.addRow(1.0, highspy.kHighsInf, len(index), index, np.ones(len(index)))
            else:
                index = np.array([i, *others], dtype=np.int32)
                value = np.ones(len(index))
                value[0] = -1.0
                master.addRow(0.0, highspy.kHighsInf, len(index), index, value)
            rows += 1
    return rows


def cover_count(g: np.ndarray, level: float) -> int:
    """Fewest cells of the cut ``g y >= level`` (``0 < g_i <= level``) that can meet it.

    A binary ``y`` meeting the cut has at least this many ones on the cut's support:
    the largest ``k - 1`` coefficients sum to less than the level.
    """
    total = np.cumsum(np.sort(g)[::-1])
    return int(min(np.searchsorted(total, level * (1 - 1e-9)) + 1, len(g)))


def bound(
    shape: tuple[int, ...],
    seed: int,
    seconds: float,
    cap: float | None,
    out: Path,
    milp_round: float,
    bridges: bool = True,
    covers: bool = True,
    repair: int = 0,
) -> None:
    begin = time.perf_counter()
    case = make_case(shape, seed)
    table = case.table
    levels = required_levels(table, case.requirements)
    blocks = level_blocks(levels)
    n = len(table)

    def emit(event: dict[str, Any]) -> None:
        event = {
            "case": "x".join(map(str, shape)),
            "seed": seed,
            "t": round(time.perf_counter() - begin, 1),
            "load1": round(os.getloadavg()[0], 2),
            **event,
        }
        with out.open("a") as f:
            f.write(json.dumps(event) + "\n")
        print(json.dumps(event), flush=True)

    g0, c0 = time.perf_counter(), time.process_time()
    result = suppress(table, case.requirements, options=SuppressionOptions(weight=Weight.COUNT), seed=seed)
    guard = frozenset(table.index(k) for k in result.suppressed)
    ok = not failures(table, result.suppressed, case.requirements)
    emit(
        {
            "event": "guard",
            "cells": len(guard),
            "audit_ok": ok,
            "seconds": round(time.perf_counter() - g0, 1),
            "cpu_seconds": round(time.process_time() - c0, 1),
        }
    )
    best = len(guard) if ok else np.inf
    best_pattern = sorted(guard)

    sep = _Separator(table, levels, cap)
    lo = np.zeros(n)
    lo[list(levels)] = 1.0
    empty = np.empty(0)
    from scipy import sparse

    master = lp_model(sparse.csc_matrix((0, n)), np.ones(n), lo, np.ones(n), empty, empty)
    if bridges:
        added_bridges = add_bridges(master, table, set(levels))
        emit({"event": "bridges", "rows": added_bridges})
    cuts = 0
    lower = float(lo.sum())
    kind = "sensitive cells"

    def add_cut(g: np.ndarray, level: float) -> None:
        index = np.flatnonzero(g > 1e-12).astype(np.int32)
        master.addRow(float(level), highspy.kHighsInf, len(index), index, g[index].astype(np.float64))
        if covers:
            k = cover_count(g[index], float(level))
            if k > 1:
                master.addRow(float(k), highspy.kHighsInf, len(index), index, np.ones(len(index)))

    def separate(y: np.ndarray, binary: bool) -> tuple[int, int]:
        nonlocal cuts
        added = reached = 0
        for p, level, upward in blocks:
            ok_p, g = sep.cut(y, p, level, upward, binary=binary)
            reached += ok_p
            if g is not None:
                add_cut(g, level)
                added += 1
                # more cuts for this level: withhold the cell the cut weighs most and
                # separate again (each cut comes from duals: valid whatever the point)
                z = y.copy()
                for _ in range(repair if binary else 0):
                    z[int(np.argmax(np.where(z > 0.5, -1.0, g)))] = 1.0
                    done, g = sep.cut(z, p, level, upward, binary=True)
                    if done or g is None:
                        break
                    add_cut(g, level)
                    added += 1
        cuts += added
        return added, reached

    # integer points HiGHS finds during a master MILP (callback), separated after it
    found: list[np.ndarray] = []

    def collect(event: Any) -> None:
        found.append(np.array(event.data_out.mip_solution, dtype=np.float64))

    master.cbMipImprovingSolution.subscribe(collect)
    integral = False
    rounds = 0
    master_lp_seconds = 0.0
    # the time limit counts from here: the guard's run above is not the bound's
    seconds += time.perf_counter() - begin
    while time.perf_counter() - begin < seconds:
        # LP rounds: cheap cuts at fractional points, until they stop raising the bound
        if integral:
            master.changeColsIntegrality(
                n, np.arange(n, dtype=np.int32), np.full(n, highspy.HighsVarType.kContinuous)
            )
            integral = False
            # from scratch: started from the MILP's solution, HiGHS 1.16's primal
            # clean-up ran for minutes on a 6 x 6 x 6 master of 1,500 cuts
            master.clearSolver()
        trail: list[float] = []
        while time.perf_counter() - begin < seconds:
            left = seconds - (time.perf_counter() - begin)
            master.setOptionValue(
                "time_limit", float(master.getRunTime()) + max(1.0, min(left, 5 * _LP_SECONDS))
            )
            t0 = time.perf_counter()
            master.run()
            master_lp_seconds += time.perf_counter() - t0
            if master.getModelStatus() != highspy.HighsModelStatus.kOptimal:
                break  # out of time: no LP bound from this round
            value = float(master.getInfo().objective_function_value)
            y = np.asarray(master.getSolution().col_value)
            trail.append(value)
            if value > lower:
                lower, kind = value, "LP relaxation over the cuts"
            added, _ = separate(y, binary=False)
            if not added or (len(trail) > 4 and trail[-1] - trail[-5] < 0.05):
                break
        emit(
            {
                "event": "lp",
                "bound": round(lower, 3),
                "kind": kind,
                "cuts": cuts,
                "lps": sep.lps,
                "failed": sep.failed,
                "attacker_lp_s": round(sep.seconds, 1),
                "master_lp_s": round(master_lp_seconds, 1),
            }
        )
        # the master MILP
        master.changeColsIntegrality(
            n, np.arange(n, dtype=np.int32), np.full(n, highspy.HighsVarType.kInteger)
        )
        integral = True
        left = seconds - (time.perf_counter() - begin)
        if left <= 1:
            break
        master.setOptionValue("time_limit", float(master.getRunTime()) + min(left, milp_round))
        master.setOptionValue("mip_rel_gap", 0.0)
        # no start pattern: HiGHS 1.16 then may report one MIP's optimum and hand back
        # the start as its solution (cuts.py), and a bound is only as good as its solve
        found.clear()
        master.run()
        info = master.getInfo()
        status = master.getModelStatus()
        optimal = status == highspy.HighsModelStatus.kOptimal
        dual = float(info.mip_dual_bound)
        value = float(info.objective_function_value) if info.primal_solution_status else np.inf
        here = value if optimal else dual
        if np.isfinite(here) and here > lower - 1e-9:
            # integral objective: the bound rounds up
            lower, kind = here, "master optimum" if optimal else "master dual bound"
        rounds += 1
        y = np.round(np.asarray(master.getSolution().col_value)) if info.primal_solution_status else None
        added = reached = 0
        if y is not None:
            added, reached = separate(y, binary=True)
            # the other integer points HiGHS met on its way (its incumbents): their cuts
            # too, many per round instead of a few (each is valid whatever the point)
            seen = {y.tobytes()}
            for other in found[::-1][:_MORE_POINTS]:
                if time.perf_counter() - begin >= seconds:
                    break  # each point costs an LP per level: not past the limit
                point = np.round(np.clip(other, 0.0, 1.0))
                if point.tobytes() not in seen:
                    seen.add(point.tobytes())
                    added += separate(point, binary=True)[0]
            if reached == len(blocks):
                hidden = [table.keys[i] for i in np.flatnonzero(y > 0.5)]
                audited = not failures(table, hidden, case.requirements)
                if audited and y.sum() < best:
                    best, best_pattern = int(y.sum()), [int(i) for i in np.flatnonzero(y > 0.5)]
        emit(
            {
                "event": "milp",
                "round": rounds,
                "status": str(status),
                "master": None if not np.isfinite(value) else round(value, 3),
                "dual": round(dual, 3),
                "bound": round(lower, 3),
                "bound_ceil": int(np.ceil(lower - 1e-6)),
                "kind": kind,
                "reached": reached,
                "levels": len(blocks),
                "new_cuts": added,
                "cuts": cuts,
                "best": None if not np.isfinite(best) else int(best),
            }
        )
        if y is not None and reached == len(blocks) and optimal and best == int(y.sum()):
            # the master's optimum protects every level (and passed the LP audit above)
            emit({"event": "proven", "optimum": int(y.sum())})
            break
    gap = (best / np.ceil(lower - 1e-6) - 1) if np.isfinite(best) and lower > 0 else None
    emit(
        {
            "event": "final",
            "bound": round(lower, 3),
            "bound_ceil": int(np.ceil(lower - 1e-6)),
            "kind": kind,
            "best": None if not np.isfinite(best) else int(best),
            "guard": len(guard),
            "gap_guard": round(len(guard) / np.ceil(lower - 1e-6) - 1, 4),
            "gap_best": None if gap is None else round(float(gap), 4),
            "cuts": cuts,
            "lps": sep.lps,
            "failed_lps": sep.failed,
            "cap": cap,
            "best_pattern": best_pattern,
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--case", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--minutes", type=float, default=18.0)
    parser.add_argument("--milp-round", type=float, default=240.0, help="seconds per master MILP solve")
    parser.add_argument(
        "--cap", type=float, default=None, help="cap rooms at cap x level (default: the audit's model)"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--no-bridges", action="store_true", help="without the bridge rows (session 16's master)"
    )
    parser.add_argument("--no-covers", action="store_true", help="without the cardinality rows of each cut")
    parser.add_argument(
        "--repair", type=int, default=0, help="per level missed at an integer point, this many more cuts"
    )
    args = parser.parse_args()
    shape = tuple(int(x) for x in args.case.split("x"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    bound(
        shape,
        args.seed,
        60 * args.minutes,
        args.cap,
        args.out,
        args.milp_round,
        bridges=not args.no_bridges,
        covers=not args.no_covers,
        repair=args.repair,
    )


if __name__ == "__main__":
    main()
