"""Secondary (complementary) suppression: which further cells to withhold so that every
sensitive cell's feasibility interval reaches its protection levels.

Which method runs (unless ``SuppressionOptions.method`` forces one):

* **optimal** (:mod:`~guard.suppression.optimal`, the CSP MILP) when
  ``cells * sensitive cells <= optimal_limit`` (default 20 000, about a 20 x 20 table
  with marginals and 5 % sensitive cells). HiGHS runs at most ``time_limit`` seconds;
  if it found a pattern by then that pattern is used (``optimal=False``), otherwise,
  or if the capped model is infeasible, the heuristic takes over.
* **heuristic** (:mod:`~guard.suppression.heuristic`) above the threshold.

Either way the pattern is then audited (:func:`~guard.suppression.audit.failures`,
true bounds, LP per sensitive cell) and any sensitive cell that falls short, e.g. by
solver tolerance, is repaired with the heuristic LP, for at most ``repair_rounds``
passes. Costs are secretly perturbed (:mod:`~guard.suppression.costs`) so the pattern
is not a deterministic function of the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from guard.suppression.audit import failures
from guard.suppression.costs import base_weights, perturbed_costs
from guard.suppression.heuristic import solve_heuristic
from guard.suppression.model import (
    Method,
    ProtectionInfeasible,
    ProtectionLevels,
    SuppressionOptions,
    SuppressionResult,
    required_levels,
)
from guard.suppression.optimal import solve_optimal
from guard.suppression.table import Key, Table

__all__ = ["choose_method", "suppress"]


def choose_method(table: Table, sensitive: int, options: SuppressionOptions) -> Method:
    """The method :func:`suppress` uses for ``sensitive`` sensitive cells of ``table``."""
    if options.method is not None:
        return options.method
    return Method.OPTIMAL if len(table) * sensitive <= options.optimal_limit else Method.HEURISTIC


def suppress(
    table: Table,
    requirements: Mapping[Key, ProtectionLevels],
    *,
    options: SuppressionOptions | None = None,
    seed: int | None = None,
    forced: Iterable[Key] = (),
    kept: Iterable[Key] = (),
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
    proven = False
    hidden: frozenset[int] | None = None
    if method is Method.OPTIMAL:
        outcome = solve_optimal(
            table, levels, costs, forced=forced_idx, kept=kept_idx, time_limit=opts.time_limit
        )
        if outcome is not None:
            hidden, proven = outcome.suppressed, outcome.proven
        else:
            method = Method.HEURISTIC
    if hidden is None:
        hidden = solve_heuristic(table, levels, costs, suppressed=forced_idx, kept=kept_idx)

    before = len(hidden)
    for _ in range(opts.repair_rounds + 1):
        failing = failures(table, [table.keys[i] for i in hidden], requirements)
        if not failing:
            return _result(table, primary, hidden, method, proven, weights, len(hidden) - before)
        short = {table.index(f.key) for f in failing}
        hidden = solve_heuristic(
            table, {i: levels[i] for i in short}, costs, suppressed=hidden, kept=kept_idx
        )
    raise ProtectionInfeasible(
        f"{len(failing)} sensitive cells still fail the audit after {opts.repair_rounds} repair passes"
    )


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
