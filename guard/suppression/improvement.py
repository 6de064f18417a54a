"""What runs after the first pattern when the MILP did not prove one optimal: the
recombination of randomised heuristic patterns (3-D, up to ``recombine_limit``), the
MILP by capacity cuts started from the best pattern (on 3-D tables above
``recombine_limit`` with its masters' work inside HiGHS counted too), and a local search
on 3-D tables; the cheapest pattern found is kept, with the certificates proving it.
A pattern of only the cells every pattern withholds (sensitive, forced) is kept as it
is.

Each stops on a count of work, not on the clock, so one table with one secret gives one
pattern whatever the machine's load: the recombination's MILPs by their node count
(:mod:`~guard.suppression.recombination`), the cut loop by its simplex iterations and
master nodes (:mod:`~guard.suppression.cuts`; and by the masters' MIP checks on 3-D
tables above ``recombine_limit``, :mod:`~guard.suppression.budget`), the local search by
its moves (:mod:`~guard.suppression.localsearch`). The clock, at ``_FAIL_SAFE`` /
``_CUT_FAIL_SAFE`` times ``time_limit``, is a fail-safe only; when it stops the cut
loop, the loop's patterns are dropped (fail closed: the pattern before it stays).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from guard.suppression.certificates import Certificates
from guard.suppression.cuts import CutOutcome, solve_by_cuts
from guard.suppression.heuristic import solve_heuristic
from guard.suppression.localsearch import improve_locally
from guard.suppression.model import Levels, Method, ProtectionInfeasible, SuppressionOptions, level_blocks
from guard.suppression.recombination import Recombined, crossed, recombine
from guard.suppression.redundancy import drop_redundant
from guard.suppression.table import Table

__all__ = ["MASTER_CHECKS", "Improved", "improve"]

#: the cut loop's master MILPs stop within 5 % of their optimum: each round is then
#: several times cheaper, so more rounds fit in ``time_limit``, and its first complete
#: pattern is within 5 % of the optimum (on 20 x 20 tables it reaches the fewest cells
#: where the exact rounds ran out of time; ``benchmarks/RESULTS.md``, session 12)
_ONLINE_GAP = 0.05
#: the cut loop's patterns missing at most 1 / _NEARLY of the levels are completed as
#: the loop goes (others only when last)
_NEARLY = 10
#: the recombination's MILPs stop by their node count; the clock, at this many times
#: ``time_limit`` each, only when a machine is far slower than the node count assumes
_FAIL_SAFE = 4
#: the cut loop stops by its simplex iterations; the clock, at this many times
#: ``time_limit``, only on a machine far slower than the budget assumes. At 4 it fired
#: on an 8 x 8 x 8 table at load 8-12 on 2 cores (84 cells instead of 82, session 15):
#: a loop of about ``time_limit`` quiet seconds must not reach it at 10x the load
_CUT_FAIL_SAFE = 15
#: the cut loop's budget in simplex iterations per second of ``time_limit``: what it
#: spent per second on a quiet machine of 2 cores (session 15; 20 x 20 tables: 9,000-
#: 12,600 in 2 s). A count of work, so the pattern does not depend on the load
_ITERATIONS_PER_SECOND = 6_000
#: branch-and-bound nodes per master MILP of the cut loop
_MASTER_NODES = 500
#: on 3-D tables above ``recombine_limit``, the cut loop's limit on its master MILPs'
#: work in HiGHS's MIP checks over the loop (:mod:`~guard.suppression.budget`). The loop
#: at 2 s took 23-65 checks on 8 x 8 x 8 seeds 0/1 and 10 x 10 x 10/0, and 190 on
#: 8 x 8 x 8/2 (50,000 simplex iterations against its 12,000: one master ran on);
#: at 100 (or 60) 8 x 8 x 8/2 ends at the same 88 cells, 8 s of loop instead of 10
#: (session 18)
MASTER_CHECKS = 100
#: up to this many cells the local search runs from the pattern before the cut loop
#: too, and the cheaper end is kept: from the cut loop's pattern it ended 3 cells above
#: the other on one 8 x 8 x 8 table of three (86 against 83), and a second descent costs
#: 3-5 s of CPU there; on 10 x 10 x 10 (1,331 cells) the cut loop's start won on all
#: three tables by 3-12 cells and a second descent would cost about 20 s (session 17)
_BOTH_CELLS = 1_000
#: local-search moves per table are capped at this many divided by its cells: a move
#: costs LPs over the whole table (session 16, after the pruning's LPs were made
#: cheaper: about 0.1 s of CPU on 10 x 10 x 10), so larger tables get fewer (up to
#: 10 x 10 x 10: ``SuppressionOptions.moves``, 100; 12 x 12 x 12: 63). Moves are tried
#: in one order, so more of them never cost cells (10 x 10 x 10: 60 moves gave
#: 154/159/153 cells, 100 moves 152/156/152)
_MOVE_CELLS = 140_000


@dataclass(frozen=True)
class Improved:
    """A pattern, the certificates of its deviations, and whether a MILP proved it
    optimal."""

    hidden: frozenset[int]
    certificates: Certificates
    proven: bool


def improve(
    table: Table,
    levels: Levels,
    costs: np.ndarray,
    start: Improved,
    forced: frozenset[int],
    kept: frozenset[int],
    opts: SuppressionOptions,
) -> tuple[frozenset[int], Certificates, bool, bool]:
    """From the pruned pattern ``start``: ``(withheld cells, certificates, proven,
    by a MILP)`` of the cheapest pattern found (``start``'s when nothing is cheaper)."""
    hidden, certificates = start.hidden, start.certificates
    proven = by_milp = False
    #: patterns the local search also starts from (the one before the cut loop's)
    starts: list[tuple[frozenset[int], Certificates]] = []
    size = len(table) * len(levels)
    search = opts.method is not Method.HEURISTIC
    if hidden <= forced | levels.keys():
        # only cells every pattern withholds: none cheaper exists (a linked view where
        # the history fixes all but a few cells, e.g. bench_first's q13: 3,236 of 3,295)
        return hidden, certificates, proven, by_milp
    if search and opts.starts > 1 and size <= opts.recombine_limit and crossed(table):
        found = recombine(
            table,
            levels,
            costs,
            Recombined(hidden, certificates),
            forced=forced,
            kept=kept,
            distant=opts.reuses_distant(len(table)),
            starts=opts.starts,
            nodes=opts.nodes,
            seconds=_FAIL_SAFE * opts.time_limit,
        )
        hidden, certificates = found.hidden, found.certificates
    # on 3-D tables above the recombination's size one master MILP's root can run for
    # many seconds (8 x 8 x 8, 10 x 10 x 10: 19 s at load 12), past its node limit:
    # there the loop also counts the masters' checks inside HiGHS, so the work, not the
    # clock, stops it (guard/suppression/budget.py)
    above = size > opts.recombine_limit and crossed(table)
    if search and size <= opts.cut_limit:
        better = _by_cuts(table, levels, costs, hidden, forced, kept, opts, MASTER_CHECKS if above else None)
        if better is not None:
            starts.append((hidden, certificates))
            hidden, certificates, proven, by_milp = better.hidden, better.certificates, better.proven, True
    moves = min(opts.moves, _MOVE_CELLS // max(1, len(table)))
    if search and not proven and moves > 0 and crossed(table):
        if len(table) > _BOTH_CELLS:
            starts.clear()
        starts.insert(0, (hidden, certificates))
        ends = [
            improve_locally(
                table,
                levels,
                costs,
                pattern,
                proofs,
                forced=forced,
                kept=kept,
                distant=opts.reuses_distant(len(table)),
                moves=moves,
            )
            for pattern, proofs in starts
        ]
        # the cheapest; on a tie the first (the cut loop's)
        pick = min(range(len(ends)), key=lambda k: (float(costs[list(ends[k][0])].sum()), k))
        hidden, certificates = ends[pick]
        by_milp = by_milp and pick == 0
    return hidden, certificates, proven, by_milp


def _by_cuts(
    table: Table,
    levels: Levels,
    costs: np.ndarray,
    incumbent: frozenset[int],
    forced: frozenset[int],
    kept: frozenset[int],
    opts: SuppressionOptions,
    checks: int | None,
) -> Improved | None:
    """The capacity-cut MILP started from ``incumbent``; None unless strictly cheaper,
    or when the fail-safe clock stopped the loop (the pattern before it is kept:
    what the loop found by then depends on the load). ``checks``: the masters' limit
    in HiGHS's MIP checks (:class:`~guard.suppression.budget.Budget`).

    Every master pattern that misses only a few levels is completed by the heuristic
    and pruned as the loop goes (a primal heuristic: the rounds' patterns differ, and the
    cheapest completion is often not the last one's), the last pattern in any case; the
    cheapest pattern found, complete or completed, is kept."""
    best: list[Improved] = []
    blocks = len(level_blocks(levels))
    done: set[frozenset[int]] = set()

    def consider(found: Improved | None) -> None:
        if found is not None and (not best or _cost(costs, found) < _cost(costs, best[0])):
            best[:] = [found]

    def completed(outcome: CutOutcome) -> None:
        done.add(outcome.suppressed)
        consider(_completed(table, levels, costs, outcome, forced, kept, opts))

    def nearly(outcome: CutOutcome) -> None:
        # a completion costs about a round: only for patterns that miss few levels
        if blocks - len(outcome.deviations) <= max(2, blocks // _NEARLY):
            completed(outcome)

    outcome = solve_by_cuts(
        table,
        levels,
        costs,
        forced=forced,
        kept=kept,
        start=incumbent,
        iterations=int(_ITERATIONS_PER_SECOND * opts.time_limit),
        nodes=_MASTER_NODES,
        time_limit=_CUT_FAIL_SAFE * opts.time_limit,
        gap=_ONLINE_GAP,
        each=nearly,
        # the bridge rows on 3-D tables only: there they cut 6 x 6 x 6 and 8 x 8 x 8
        # patterns by up to 7 cells; on 20 x 20 tables at the policy's 2 s they gave
        # 31/42/39 cells where the loop without them gives 31/41/39 (session 17), so 2-D
        # tables keep their patterns
        bridges=crossed(table),
        checks=checks,
    )
    if outcome is None or outcome.timed_out:
        return None
    if outcome.complete and outcome.proven:
        best[:] = [Improved(outcome.suppressed, _certified(table, outcome), True)]
    elif outcome.suppressed and outcome.suppressed not in done:
        completed(outcome)  # completed (when it misses levels) and pruned
    if not best or _cost(costs, best[0]) >= costs[list(incumbent)].sum():
        return None
    return best[0]


def _cost(costs: np.ndarray, found: Improved) -> float:
    return float(costs[list(found.hidden)].sum())


def _certified(table: Table, outcome: CutOutcome) -> Certificates:
    """The certificates of the cut loop's deviations (each checked exactly)."""
    certificates = Certificates(table)
    for deviation in outcome.deviations.values():
        support = np.flatnonzero(deviation)
        certificates.add(support, deviation[support], outcome.suppressed)
    return certificates


def _completed(
    table: Table,
    levels: Levels,
    costs: np.ndarray,
    outcome: CutOutcome,
    forced: frozenset[int],
    kept: frozenset[int],
    opts: SuppressionOptions,
) -> Improved | None:
    """A master pattern, completed by the heuristic where it misses levels and pruned;
    None when the heuristic cannot complete it."""
    certificates = _certified(table, outcome)
    hidden = outcome.suppressed
    if not outcome.complete:
        try:
            hidden = solve_heuristic(
                table,
                levels,
                costs,
                certificates,
                suppressed=hidden | forced,
                kept=kept,
                distant=opts.reuses_distant(len(table)),
            )
        except ProtectionInfeasible:
            return None
    hidden = drop_redundant(table, hidden, levels, costs, certificates, fixed=forced)
    return Improved(hidden, certificates, False)
