"""Recombination: several randomised heuristic patterns, then the exact MILP over the
cells they use.

The heuristic (:mod:`~guard.suppression.heuristic`) builds a pattern one sensitive
cell at a time, so which complementary cells it picks depends on the order in which
earlier choices make cells free; pruned (:mod:`~guard.suppression.redundancy`), its
patterns on random 3-D tables with all margins differ by up to 40 % from one cost
vector to another, and the best of a few is often near the optimum while the first is
20-25 % above it (``benchmarks/RESULTS.md``, session 14). So:

1. the heuristic runs ``starts`` times, the first on the costs themselves, the others
   on the costs multiplied by ``1 + u_i``, ``u_i ~ U[0, 1)`` from a generator seeded by
   the costs (secret: they carry the secret perturbation of
   :mod:`~guard.suppression.costs`, so this draw is as unpredictable as the costs, and
   one table with one seed still gets one pattern); each pattern is pruned on the
   true costs;
2. the best pattern is recombined with each other one in turn, cheapest first: the
   CSP MILP (:func:`~guard.suppression.optimal.solve_csp_from`) over the union of the
   two, every other cell published (a row of ``A`` keeps only its cells in the union:
   ``d_i = 0`` elsewhere), started from the best, stopped after ``nodes``
   branch-and-bound nodes (HiGHS's work, not the clock: the same table gets the same
   pattern on a loaded machine; ``seconds`` is a fail-safe only); its pattern, pruned,
   becomes the best when cheaper. The union of two patterns is about 1.5 times one, a
   MILP HiGHS solves in a second or two; the union of all eight was 5-20 times slower
   for no better pattern (6 x 6 x 6 tables).

The cheapest pattern found is returned with the certificates of its deviations (the
heuristic's, kept by the pruning; the MILP's, checked exactly by
:meth:`Certificates.add`); :func:`~guard.suppression.secondary.suppress` audits it as
any other. Work: ``starts`` heuristic runs (each a few LPs per sensitive cell) and
``starts - 1`` MILPs over ``union x (1 + 2 x sensitive levels)`` columns.
"""

from __future__ import annotations

import hashlib
from collections.abc import Set
from dataclasses import dataclass

import numpy as np

from guard.arrays import distinct
from guard.suppression.certificates import Certificates
from guard.suppression.heuristic import solve_heuristic
from guard.suppression.model import Levels, ProtectionInfeasible
from guard.suppression.optimal import CspModel, solve_csp_from
from guard.suppression.redundancy import drop_redundant
from guard.suppression.table import Table

__all__ = ["Recombined", "crossed", "recombine"]


@dataclass(frozen=True)
class Recombined:
    """The cheapest pattern found and the certificates proving it."""

    hidden: frozenset[int]
    certificates: Certificates


def recombine(
    table: Table,
    levels: Levels,
    costs: np.ndarray,
    incumbent: Recombined,
    *,
    forced: Set[int] = frozenset(),
    kept: Set[int] = frozenset(),
    distant: bool = True,
    starts: int = 8,
    nodes: int = 2_000,
    seconds: float = 10.0,
) -> Recombined:
    """The cheapest of ``incumbent``, ``starts - 1`` further heuristic patterns on
    jittered costs, and their recombinations (see the module docstring).

    ``incumbent``: a pruned protecting pattern with its certificates (the heuristic's
    on the costs themselves, the first start). ``nodes``: branch-and-bound nodes of
    the MILP; ``seconds``: its wall-clock fail-safe only."""
    rng = np.random.default_rng(_seed(costs))
    found = [incumbent]
    for _ in range(starts - 1):
        jittered = costs * (1.0 + rng.random(len(costs)))
        certificates = Certificates(table)
        try:
            hidden = solve_heuristic(
                table, levels, jittered, certificates, suppressed=forced, kept=kept, distant=distant
            )
        except ProtectionInfeasible:
            continue  # the first start succeeded: this cannot happen but for solver trouble
        hidden = drop_redundant(table, hidden, levels, costs, certificates, fixed=forced)
        found.append(Recombined(hidden, certificates))
    found.sort(key=lambda r: _cost(costs, r.hidden))
    best = found[0]
    for other in found[1:]:
        if other.hidden <= best.hidden:
            continue  # nothing to recombine
        merged = _within(
            table, levels, costs, sorted(best.hidden | other.hidden), best.hidden, forced, nodes, seconds
        )
        if merged is not None and _cost(costs, merged.hidden) < _cost(costs, best.hidden):
            best = merged
    return best


def crossed(table: Table) -> bool:
    """Whether some cell lies in three relations or more (a 3-D table, a hierarchy
    crossed with a dimension): where none does, deviations are cycles of a network,
    and the recombination found no cheaper pattern on 15 x 15 and 20 x 20 tables, in
    4-19 s (session 14), so the guard skips it there."""
    return bool(np.diff(table.csc.indptr).max(initial=0) > 2)


def _seed(costs: np.ndarray) -> int:
    """A seed drawn from the (secretly perturbed) costs: unpredictable when they are,
    and the same for the same costs."""
    return int.from_bytes(hashlib.blake2b(costs.tobytes(), digest_size=16).digest(), "big")


def _cost(costs: np.ndarray, hidden: Set[int]) -> float:
    return float(costs[list(hidden)].sum())


def _within(
    table: Table,
    levels: Levels,
    costs: np.ndarray,
    cells: list[int],
    start: Set[int],
    forced: Set[int],
    nodes: int,
    seconds: float,
) -> Recombined | None:
    """The CSP MILP with every cell outside ``cells`` published; None when it found no
    pattern within its limits."""
    columns = np.asarray(cells, dtype=int)
    where = {c: k for k, c in enumerate(cells)}
    sub = table.csc[:, columns]
    matrix = sub[distinct(sub.indices)].tocsr()
    a, lb, ub = table.arrays
    model = CspModel(
        matrix,
        (ub - a)[columns],
        (a - lb)[columns],
        costs[columns],
        {where[p]: lv for p, lv in levels.items()},
        frozenset(where[i] for i in forced),
    )
    outcome = solve_csp_from(model, {where[i] for i in start}, node_limit=nodes, time_limit=seconds)
    if outcome is None:
        return None
    chosen = columns[sorted(outcome.suppressed)]
    hidden = frozenset(int(i) for i in chosen)
    mask = np.zeros(len(cells), dtype=bool)
    mask[sorted(outcome.suppressed)] = True
    certificates = Certificates(table)
    for deviation in outcome.deviations.values():
        certificates.add(columns[mask], deviation[mask], hidden)
    hidden = drop_redundant(table, hidden, levels, costs, certificates, fixed=forced)
    return Recombined(hidden, certificates)
