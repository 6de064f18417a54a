"""Secondary (complementary) suppression: which further cells to withhold so that every
sensitive cell's feasibility interval reaches its protection levels.

Which method runs (unless ``SuppressionOptions.method`` forces one):

* **optimal** (:mod:`~guard.suppression.optimal`, the CSP MILP) when
  ``cells * sensitive cells <= optimal_limit`` (default 5 000: a 2-D table up to about
  15 x 15 with marginals and 5 % sensitive cells, which HiGHS proves optimal in a few
  seconds). HiGHS runs at most ``time_limit`` seconds (default 5). When it does not
  prove optimality in time, the heuristic runs too and the cheaper pattern is kept
  (in 3-D the MILP's incumbent after the limit is often worse); when the capped model
  is infeasible or no pattern was found, the heuristic's is used.
* **heuristic** (:mod:`~guard.suppression.heuristic`) above the threshold: well under
  a second for a 100 x 100 table, about 5 s for a 10 000-cell 3-D table (90 s with
  ``reuse_distant=True``, for about 30 % fewer suppressions).

A pattern not proven optimal is then pruned (:mod:`~guard.suppression.redundancy`:
complementary cells no sensitive cell needs are published, costliest first) and
improved (:mod:`~guard.suppression.improvement`): on tables where some cell lies in
three relations, up to ``recombine_limit`` cells times sensitive cells, it competes
with further heuristic patterns on secretly jittered costs, recombined pairwise by the
MILP over their union (:mod:`~guard.suppression.recombination`: 5 x 5 x 5 tables at the
optimum); up to ``cut_limit`` cells times sensitive cells, unless the heuristic was
forced, it starts the same MILP solved
by capacity cuts (:mod:`~guard.suppression.cuts`, its master MILPs stopped within
5 %), for a budget of simplex iterations (about ``time_limit`` seconds on a quiet
machine); the master patterns that miss few levels, and the last one when the budget
runs out first, are completed by the heuristic and pruned; and on 3-D tables a local
search (:mod:`~guard.suppression.localsearch`) publishes one complementary cell at a
time, re-routes and prunes nearby, for ``moves`` moves (8 x 8 x 8: 86-108 cells to
83-92). Every step stops on a count of work, so one table with one secret gets one
pattern on any load (the full MILP above, whose root alone can outlast
``time_limit``, is still stopped by the clock). The cheapest pattern is kept. On
random tables with all margins this brings 5 x 5 x 5 tables to the fewest cells,
15 x 15 and 20 x 20 within about 5 %
(``benchmarks/bench_optimality.py``; sessions 12-15).

Either way the pattern is then verified against the true bounds. Both methods produce,
for each sensitive cell and direction, an attacker deviation (MILP: the ``d`` vectors;
heuristic: the LP deviations); each is checked exactly
(:class:`~guard.suppression.certificates.Certificates`: ``A d = 0``, within the
bounds, only withheld cells move) and is then a feasible point of the audit LP that
proves the interval reaches the level. Sensitive cells without such a certificate are
audited by LP (:func:`~guard.suppression.audit.failures`), and any that falls short,
e.g. by solver tolerance, is repaired with the heuristic, for at most
``repair_rounds`` passes. Finally the pattern is made to hold against the contributors
of single-contributor cells (:mod:`~guard.suppression.singletons`). Costs are secretly
perturbed (:mod:`~guard.suppression.costs`) so the pattern is not a deterministic
function of the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

import numpy as np

from guard.suppression.audit import failures
from guard.suppression.certificates import Certificates
from guard.suppression.costs import base_weights, perturbed_costs
from guard.suppression.heuristic import solve_heuristic
from guard.suppression.improvement import Improved, improve
from guard.suppression.model import (
    Levels,
    Method,
    Protection,
    ProtectionInfeasible,
    ProtectionLevels,
    SuppressionOptions,
    SuppressionResult,
    required_levels,
)
from guard.suppression.optimal import solve_optimal
from guard.suppression.redundancy import drop_redundant
from guard.suppression.singletons import protect_singletons
from guard.suppression.table import K, Key, Table

__all__ = ["choose_method", "suppress"]


def choose_method(table: Table, sensitive: int, options: SuppressionOptions) -> Method:
    """The method :func:`suppress` uses for ``sensitive`` sensitive cells of ``table``."""
    if options.method is not None:
        return options.method
    return Method.OPTIMAL if len(table) * sensitive <= options.optimal_limit else Method.HEURISTIC


def suppress(
    table: Table,
    requirements: Mapping[K, ProtectionLevels],
    *,
    options: SuppressionOptions | None = None,
    seed: int | None = None,
    forced: Iterable[Key] = (),
    kept: Iterable[Key] = (),
    singletons: Iterable[Key] = (),
    guarded: Iterable[Key] | None = None,
    prior: Iterable[Mapping[Key, float]] = (),
    unasked: Iterable[Key] = (),
) -> SuppressionResult:
    """Withhold every sensitive cell and enough complementary cells to protect them.

    Args:
        table: the cells, bounds and relations (see :class:`~guard.suppression.table.Table`).
        requirements: the sensitive cells and their protection levels, e.g. the
            :class:`guard.rules.RuleVerdict` of each sensitive cell.
        options: method, weights, limits; defaults to :class:`SuppressionOptions()`.
        seed: secret seed of the cost perturbation; None draws a fresh one. Fix it per
            released table (derived from a secret key and the table's fingerprint) so
            the same table always gets the same pattern.
        forced: further cells that must be withheld (e.g. withheld in an earlier
            release of a linked table), without protection levels of their own.
        kept: cells that must stay published (e.g. already released elsewhere).
        singletons: cells with a single contributor, who knows the cell's value; the
            pattern must hold against them too (:mod:`~guard.suppression.singletons`).
        guarded: further cells no such insider may recover exactly (sensitive cells
            always are).
        prior: attacker deviations that proved an earlier pattern over these cells
            (:attr:`SuppressionResult.proofs`); each is checked exactly against this
            table and the cells withheld from the start, and those that hold spare the
            heuristic an LP for every level they already cover.
        unasked: sensitive cells no answer holds: against an insider, held only to what
            the ``kept`` cells do not already tell her (:mod:`~guard.suppression.widest`).

    Raises:
        ProtectionInfeasible: a sensitive cell is in ``kept``, or cannot reach its
            levels with every cell outside ``kept`` withheld, or still fails the
            audit after the repair passes.
        ValueError: a key is unknown or a level negative.
    """
    opts = options or SuppressionOptions()
    levels = required_levels(table, requirements)
    forced_idx = frozenset(table.index(k) for k in forced)
    kept_idx = frozenset(table.index(k) for k in kept)
    clash = (set(levels) | forced_idx) & kept_idx
    if clash:
        key = table.keys[min(clash)]
        raise ProtectionInfeasible(f"cell {key!r} must be withheld but is marked as already published")
    primary = frozenset(table.keys[i] for i in (set(levels) | forced_idx))
    weights = base_weights(table, opts.weight)
    if not levels:
        return _result(table, primary, forced_idx, Method.OPTIMAL, True, weights, 0)

    costs = perturbed_costs(table, opts.weight, opts.perturbation, seed)
    method = choose_method(table, len(levels), opts)
    exact = _optimal(table, levels, costs, forced_idx, kept_idx, opts) if method is Method.OPTIMAL else None
    proven = exact is not None and exact.proven
    if exact is not None and exact.proven:
        hidden, certificates = exact.hidden, exact.certificates
    else:
        certificates = Certificates(table)
        certificates.adopt(table, prior, forced_idx | frozenset(levels))
        hidden = solve_heuristic(
            table,
            levels,
            costs,
            certificates,
            suppressed=forced_idx,
            kept=kept_idx,
            distant=opts.reuses_distant(len(table)),
        )
        method = Method.HEURISTIC
        # an unproven MILP pattern competes with the heuristic's (each with its own
        # certificates: a deviation proves nothing for a pattern that publishes its cells)
        if exact is not None and costs[list(exact.hidden)].sum() <= costs[list(hidden)].sum():
            hidden, certificates, method = exact.hidden, exact.certificates, Method.OPTIMAL
    if not proven:
        hidden = drop_redundant(table, hidden, levels, costs, certificates, fixed=forced_idx)
        hidden, certificates, proven, by_milp = improve(
            table, levels, costs, Improved(hidden, certificates, False), forced_idx, kept_idx, opts
        )
        if by_milp:
            method = Method.OPTIMAL

    before = len(hidden)
    known = frozenset(table.index(k) for k in singletons)
    for _ in range(opts.repair_rounds + 1):
        short = _unprotected(table, hidden, levels, certificates)
        if not short:
            if known:
                # more withheld cells only widen the outsider's intervals: the proofs hold
                guard = {table.index(k) for k in guarded or ()} | set(levels)
                hidden = protect_singletons(
                    table,
                    hidden,
                    known,
                    levels,
                    costs,
                    kept_idx,
                    guarded=guard,
                    certificates=certificates,
                    unasked=frozenset(table.index(k) for k in unasked),
                )
            result = _result(table, primary, hidden, method, proven, weights, len(hidden) - before)
            return replace(result, proofs=_proofs(table, certificates, hidden))
        hidden = solve_heuristic(
            table,
            {i: levels[i] for i in short},
            costs,
            certificates,
            suppressed=hidden,
            kept=kept_idx,
            distant=opts.reuses_distant(len(table)),
        )
    raise ProtectionInfeasible(
        f"{len(short)} sensitive cells still fail the audit after {opts.repair_rounds} repair passes"
    )


def _proofs(
    table: Table, certificates: Certificates, hidden: Iterable[int]
) -> tuple[Mapping[Key, float], ...]:
    """The deviations that prove the final pattern, by cell key."""
    keys = table.keys
    return tuple(
        dict(zip(map(keys.__getitem__, cells.tolist()), moves.tolist(), strict=True))
        for cells, moves in certificates.deviations(within=set(hidden))
    )


def _optimal(
    table: Table,
    levels: Levels,
    costs: np.ndarray,
    forced: frozenset[int],
    kept: frozenset[int],
    opts: SuppressionOptions,
) -> Improved | None:
    """Run the MILP; None when it found no pattern."""
    outcome = solve_optimal(table, levels, costs, forced=forced, kept=kept, time_limit=opts.time_limit)
    if outcome is None:
        return None
    certificates = Certificates(table)
    mask = np.zeros(len(table), dtype=bool)
    mask[list(outcome.suppressed)] = True
    for deviation in outcome.deviations.values():
        certificates.add(np.flatnonzero(mask), deviation[mask], outcome.suppressed)
    return Improved(outcome.suppressed, certificates, outcome.proven)


def _unprotected(
    table: Table, hidden: frozenset[int], levels: Levels, certificates: Certificates
) -> set[int]:
    """Sensitive cells whose levels no certificate proves and the LP audit rejects."""
    doubtful = {p: lv for p, lv in levels.items() if not certificates.proven(p, lv)}
    if not doubtful:
        return set()
    requirements = {table.keys[p]: Protection(*lv) for p, lv in doubtful.items()}
    return {table.index(f.key) for f in failures(table, [table.keys[i] for i in hidden], requirements)}


def _result(
    table: Table,
    primary: frozenset[Key],
    hidden: Iterable[int],
    method: Method,
    proven: bool,
    weights: np.ndarray,
    repaired: int,
) -> SuppressionResult:
    keys = frozenset(table.keys[i] for i in hidden) | primary
    cost = float(sum(weights[table.index(k)] for k in keys))
    return SuppressionResult(
        primary=primary,
        secondary=keys - primary,
        method=method,
        optimal=proven and repaired == 0,
        cost=cost,
        repaired=repaired,
    )
