"""How far the guard's secondary suppression is from the optimal pattern.

Random 2-D and 3-D tables with every margin (GROUP BY CUBE), built from generated
microdata: per inner cell a Poisson number of respondents around a lognormal mean
(some cells of 0-3 people), each with a lognormal magnitude (skewed, like incomes).
Every cell, margins included, is judged by the guard's own rules, as a policy with
``threshold: {n: 3, protection: 0.1}`` and ``dominance: {n: 1, k: 0.6}`` would (about
5 % of the cells come out sensitive), and gets their protection levels.

For each table:

* **guard**: cells withheld by :func:`guard.suppression.suppress` with the policy
  defaults (``optimal_limit`` 5 000, ``time_limit`` 2 s, secret perturbation 0.5) and
  its wall time; ``+ins`` also protects against single contributors as answers do;
* **optimum**: the classic CSP MILP (seed 000) with the *unperturbed* weights, built
  here independently of the guard's code and solved offline by HiGHS (highspy) with a
  long time limit, started from the guard's pattern; it reports the incumbent and the
  best bound. Deviations are capped at ``cap`` times the cell's protection level
  (``--cap``, default 1: exact for 2-D tables, whose deviations decompose into
  cycles; on 3-D tables a larger cap can only lower the optimum);
* **optimum by cuts**: the same model by the guard's capacity-cut decomposition
  (:mod:`guard.suppression.cuts`) with the same limit, unperturbed weights, started
  from the guard's pattern: on larger tables it proves optima the full model does
  not reach. The table shows the best incumbent (LP-audited) and the best bound of
  the two; ``opt s`` is their time together;
* **gap**: ``guard / optimum - 1`` (against the bound when not proven: an upper
  estimate of the gap).

Weights: ``count`` (default; every withheld cell costs 1, so the optimum is the
fewest cells) or ``value`` (a withheld cell costs its magnitude).

    python benchmarks/bench_optimality.py [--cases 10x10,20x20,6x6x6] [--seeds 0,1,2]
        [--limit 600] [--full-limit S] [--weight count] [--guard-only] [--time-limit 2]
        [--cache benchmarks/.data/optimality.json]

Offline optima are cached in ``--cache`` (keyed by case, seed, weight, cap and
limit), so re-running after a change of the guard only re-times the guard.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import highspy
import numpy as np
from scipy import sparse

from guard.rules import CellContributions, Dominance, MinimumFrequency, RuleVerdict, evaluate
from guard.suppression import (
    TOTAL,
    Key,
    ProtectionInfeasible,
    SuppressionOptions,
    Table,
    Weight,
    failures,
    required_levels,
    suppress,
)
from guard.suppression.costs import base_weights

CASES = ("10x10", "15x15", "20x20", "5x5x5", "6x6x6", "8x8x8", "10x10x10")
RULES = (MinimumFrequency(3, fraction=0.1), Dominance(1, 0.6))


@dataclass(frozen=True)
class Case:
    table: Table
    requirements: dict[Key, RuleVerdict]
    singletons: tuple[Key, ...]


def make_case(shape: tuple[int, ...], seed: int) -> Case:
    """A CUBE table of generated microdata and its sensitive cells by :data:`RULES`."""
    rng = np.random.default_rng([seed, *shape])
    people = rng.poisson(rng.lognormal(np.log(18.0), 0.9, size=shape))
    # per inner cell: the respondents' magnitudes, largest first
    inner: dict[tuple[int, ...], np.ndarray] = {}
    for index in itertools.product(*map(range, shape)):
        inner[index] = np.sort(np.round(rng.lognormal(8.0, 1.0, size=people[index])))[::-1]
    cells: dict[Key, CellContributions] = {}
    for key in itertools.product(*[[*range(size), TOTAL] for size in shape]):
        ranges = [range(size) if k is TOTAL else (k,) for k, size in zip(key, shape, strict=True)]
        parts = [inner[i] for i in itertools.product(*ranges)]
        merged = np.concatenate(parts) if parts else np.zeros(0)
        top = tuple(float(x) for x in np.sort(merged)[::-1][:2])
        cells[key] = CellContributions(float(merged.sum()), len(merged), top)
    table = Table.from_cells({k: c.total for k, c in cells.items()})
    verdicts = {k: evaluate(RULES, c) for k, c in cells.items()}
    requirements = {k: v for k, v in verdicts.items() if v.sensitive}
    singletons = tuple(k for k, c in cells.items() if c.contributors == 1)
    return Case(table, requirements, singletons)


@dataclass(frozen=True)
class Optimum:
    incumbent: float
    bound: float
    proven: bool
    seconds: float


def optimum(case: Case, weights: np.ndarray, limit: float, cap: float, start: frozenset[int]) -> Optimum:
    """The CSP MILP over ``case`` with ``weights``, by HiGHS within ``limit`` seconds,
    started from the withheld cells ``start`` (written here, not the guard's model)."""
    table = case.table
    a, lb, ub = table.arrays
    matrix = table.matrix.tocsr()
    m, n = matrix.shape
    levels = required_levels(table, case.requirements)
    blocks = [
        (p, lv, up) for p, lvs in levels.items() for lv, up in zip(lvs, (True, False), strict=True) if lv > 0
    ]
    q = len(blocks)
    fixed = np.zeros(n, dtype=bool)
    fixed[list(levels)] = True
    col_lo = [fixed.astype(float)]
    col_hi = [np.ones(n)]
    rows_eq = sparse.hstack([sparse.csr_matrix((q * m, n)), sparse.block_diag([matrix] * q)])
    link_rows = []
    free = np.flatnonzero(~fixed)
    f = len(free)
    for k, (p, level, upward) in enumerate(blocks):
        limit_p = cap * max(levels[p])
        up_room = np.minimum(ub - a, limit_p)
        down_room = np.minimum(a - lb, limit_p)
        lo, hi = -down_room, up_room.copy()
        if upward:
            lo[p] = level
        else:
            hi[p] = -level
        col_lo.append(lo)
        col_hi.append(hi)
        offset = n * (k + 1)
        r = np.concatenate([np.arange(f), np.arange(f), f + np.arange(f), f + np.arange(f)])
        c = np.concatenate([offset + free, free, offset + free, free])
        v = np.concatenate([np.ones(f), -up_room[free], -np.ones(f), -down_room[free]])
        link_rows.append(sparse.coo_matrix((v, (r, c)), shape=(2 * f, n * (1 + q))))
    rows = sparse.vstack([rows_eq, *link_rows]).tocsc()
    row_lo = np.concatenate([np.zeros(q * m), np.full(2 * f * q, -highspy.kHighsInf)])
    row_hi = np.zeros(q * m + 2 * f * q)

    lp = highspy.HighsLp()
    lp.num_col_ = n * (1 + q)
    lp.num_row_ = rows.shape[0]
    lp.col_cost_ = np.concatenate([weights, np.zeros(q * n)])
    lp.col_lower_ = np.concatenate(col_lo)
    lp.col_upper_ = np.concatenate(col_hi)
    lp.row_lower_ = row_lo
    lp.row_upper_ = row_hi
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = rows.indptr
    lp.a_matrix_.index_ = rows.indices
    lp.a_matrix_.value_ = rows.data
    lp.integrality_ = [highspy.HighsVarType.kInteger] * n + [highspy.HighsVarType.kContinuous] * (q * n)
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("time_limit", float(limit))
    highs.setOptionValue("mip_rel_gap", 0.0)
    # no "threads" option: HiGHS's scheduler is global and was started by the guard's
    # run above; asking for another count makes run() err at once, and the full
    # model's result read "no incumbent, bound 0" (session 14)
    highs.passModel(lp)
    if start:
        # the integers only: HiGHS completes the deviations by LP (or drops the start)
        index = np.arange(n, dtype=np.int32)
        values = np.array([1.0 if i in start else 0.0 for i in range(n)])
        highs.setSolution(n, index, values)
    begin = time.perf_counter()
    highs.run()
    seconds = time.perf_counter() - begin
    info = highs.getInfo()
    status = highs.getModelStatus()
    proven = status == highspy.HighsModelStatus.kOptimal
    incumbent = float(info.objective_function_value) if info.primal_solution_status else float("nan")
    bound = float(info.mip_dual_bound)
    return Optimum(incumbent, incumbent if proven else bound, proven, seconds)


def optimum_by_cuts(case: Case, weights: np.ndarray, limit: float, start: frozenset[int]) -> Optimum:
    """The same optimum by the guard's capacity-cut decomposition with a long limit
    (:mod:`guard.suppression.cuts`; its bound holds whatever the code's pattern, by
    weak duality); a pattern that misses a level or fails the LP audit is no
    incumbent."""
    # imported here: --guard-only also runs on checkouts from before the module existed
    from guard.suppression.cuts import solve_by_cuts

    table = case.table
    levels = required_levels(table, case.requirements)
    begin = time.perf_counter()
    outcome = solve_by_cuts(table, levels, weights, start=start, time_limit=limit)
    seconds = time.perf_counter() - begin
    if outcome is None:
        return Optimum(float("nan"), 0.0, False, seconds)
    hidden = [table.keys[i] for i in outcome.suppressed]
    valid = outcome.complete and not failures(table, hidden, case.requirements)
    incumbent = float(weights[list(outcome.suppressed)].sum()) if valid else float("nan")
    return Optimum(incumbent, outcome.bound, valid and outcome.proven, seconds)


@dataclass(frozen=True)
class GuardRun:
    withheld: int
    cost: float
    seconds: float
    method: str
    #: cells withheld when single contributors are protected too; -1: refused
    with_insiders: int
    audit_ok: bool
    hidden: frozenset[int]


def run_guard(
    case: Case, weight: Weight, seed: int, weights: np.ndarray, time_limit: float = 2.0
) -> GuardRun:
    table = case.table
    options = SuppressionOptions(weight=weight, time_limit=time_limit)
    begin = time.perf_counter()
    result = suppress(table, case.requirements, options=options, seed=seed)
    seconds = time.perf_counter() - begin
    try:
        insiders = len(
            suppress(
                table, case.requirements, options=options, seed=seed, singletons=case.singletons
            ).suppressed
        )
    except ProtectionInfeasible:
        insiders = -1  # refused (e.g. the insider audit's budget): shown as "refused"
    hidden = frozenset(table.index(k) for k in result.suppressed)
    ok = not failures(table, result.suppressed, case.requirements)
    return GuardRun(
        len(hidden),
        float(weights[list(hidden)].sum()),
        seconds,
        result.method.value,
        insiders,
        ok,
        hidden,
    )


def _insiders(run: GuardRun) -> str:
    return "refused" if run.with_insiders < 0 else str(run.with_insiders)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--limit", type=float, default=600.0, help="offline MILP seconds per table")
    parser.add_argument(
        "--full-limit",
        type=float,
        default=None,
        help="seconds of the full model (default: --limit; 0: skip it, e.g. on large 3-D tables)",
    )
    parser.add_argument("--guard-only", action="store_true", help="time the guard, solve nothing offline")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=2.0,
        help="the guard's time_limit (policy default 2 s; on a loaded machine the loop gets less CPU)",
    )
    parser.add_argument("--weight", choices=[w.value for w in Weight], default="count")
    parser.add_argument("--cap", type=float, default=1.0, help="offline deviation cap, x protection level")
    parser.add_argument("--cache", type=Path, default=Path("benchmarks/.data/optimality.json"))
    args = parser.parse_args()
    weight = Weight(args.weight)
    cache: dict[str, dict[str, float]] = json.loads(args.cache.read_text()) if args.cache.exists() else {}
    header = (
        "| case | seed | cells | sensitive | guard | guard s | method | +ins "
        "| optimum | bound | proven | opt s | gap |"
    )
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    gaps: dict[str, list[float]] = {}
    for spec in args.cases.split(","):
        shape = tuple(int(x) for x in spec.strip().split("x"))
        for seed in (int(s) for s in args.seeds.split(",")):
            case = make_case(shape, seed)
            weights = base_weights(case.table, weight)
            guard = run_guard(case, weight, seed, weights, args.time_limit)
            value = guard.withheld if weight is Weight.COUNT else guard.cost
            if args.guard_only:
                print(
                    f"| {spec} | {seed} | {len(case.table)} | {len(case.requirements)} | {value:.6g} "
                    f"| {guard.seconds:.2f} | {guard.method} | {_insiders(guard)} |",
                    flush=True,
                )
                continue
            full = args.limit if args.full_limit is None else args.full_limit
            key = f"{spec}/{seed}/{weight.value}/cap{args.cap:g}/limit{full:g}"
            runs = {
                key: partial(optimum, case, weights, full, args.cap, guard.hidden),
                f"{spec}/{seed}/{weight.value}/cap{args.cap:g}/limit{args.limit:g}/cuts": partial(
                    optimum_by_cuts, case, weights, args.limit, guard.hidden
                ),
            }
            found = []
            for name, solve in runs.items():
                if name.endswith("/cuts") and args.cap != 1.0:
                    continue  # the decomposition caps at the level, as the guard does
                if name == key and full <= 0:
                    continue  # --full-limit 0: the decomposition alone
                if name not in cache:
                    best = solve()
                    cache[name] = {
                        "incumbent": best.incumbent,
                        "bound": best.bound,
                        "proven": best.proven,
                        "seconds": best.seconds,
                    }
                    args.cache.parent.mkdir(parents=True, exist_ok=True)
                    args.cache.write_text(json.dumps(cache, indent=1, sort_keys=True))
                found.append(cache[name])
            incumbents = [o["incumbent"] for o in found if o["incumbent"] == o["incumbent"]]
            opt = {
                "incumbent": min(incumbents) if incumbents else float("nan"),
                "bound": max(o["bound"] for o in found),
                "proven": any(o["proven"] for o in found),
                "seconds": sum(o["seconds"] for o in found),
            }
            reference = opt["incumbent"] if opt["proven"] else opt["bound"]
            gap = value / reference - 1 if reference > 0 else 0.0
            gaps.setdefault(spec, []).append(gap)
            cells = (
                spec,
                seed,
                len(case.table),
                len(case.requirements),
                f"{value:.6g}" + ("" if guard.audit_ok else " AUDIT FAIL"),
                f"{guard.seconds:.2f}",
                guard.method,
                _insiders(guard),
                f"{opt['incumbent']:.6g}",
                f"{opt['bound']:.6g}",
                "yes" if opt["proven"] else "no",
                f"{opt['seconds']:.0f}",
                f"{100 * gap:+.1f} %",
            )
            print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)
    print()
    print("| case | mean gap | max gap |")
    print("|---|---|---|")
    for spec, values in gaps.items():
        print(f"| {spec} | {100 * np.mean(values):+.1f} % | {100 * max(values):+.1f} % |")


if __name__ == "__main__":
    main()
