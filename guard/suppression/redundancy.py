"""Redundancy elimination: publish the complementary cells a pattern does not need.

The heuristic adds the support of one deviation per sensitive cell and direction, so
later deviations often route through cells withheld for earlier ones and make some
earlier complementary cells unnecessary. This pass tries to publish each complementary
cell once, costliest first (by the secretly perturbed costs, so the order is no
function of the table alone; seed 004), and publishes it only when every sensitive
cell keeps a *proof* for each protection level without it:

* a kept deviation (:class:`~guard.suppression.certificates.Certificates`) that leaves
  the cell alone, or else
* a new one, found by one LP over the cells still withheld (the cheapest deviation
  moving the sensitive cell by its level with every other cell published; an LP over
  exactly the audit's feasible set, so it exists iff the audit interval reaches the
  level), then checked exactly by :meth:`Certificates.add`.

When an LP fails or a deviation does not pass the exact check, the cell stays withheld
(fail closed). A published cell withdraws every deviation through it. The result is a
subset of the input pattern in which every complementary cell was needed when it was
tried (and so still is: publishing more cells only narrows intervals), and every
sensitive level is covered by a certificate valid for it.

An attacker who knows this pass learns that no complementary cell of the release could
have been published: a property of the true table, as optimality is for the MILP's
patterns (which are irredundant too). Which minimal pattern comes out depends on the
secret order, as the MILP's optimum depends on the secret costs.
"""

from __future__ import annotations

from collections.abc import Set

import numpy as np
from scipy import sparse

from guard.highs import LpSolver, LpStatus
from guard.suppression.certificates import Certificates
from guard.suppression.entries import linked_labels, paired_arrays, submatrix_arrays
from guard.suppression.model import Block, Levels, level_blocks
from guard.suppression.table import Table

__all__ = ["DeviationLp", "drop_redundant", "drop_redundant_below"]


def drop_redundant(
    table: Table,
    hidden: frozenset[int],
    levels: Levels,
    costs: np.ndarray,
    certificates: Certificates,
    *,
    fixed: Set[int] = frozenset(),
) -> frozenset[int]:
    """``hidden`` without the complementary cells no sensitive cell needs.

    ``certificates`` must hold deviations valid for ``hidden``; on return it holds
    deviations valid for the result (those through published cells withdrawn), at least
    one per sensitive cell and positive level. ``fixed``: cells that stay withheld
    whatever (forced by earlier releases); sensitive cells always do.
    """
    pruned = drop_redundant_below(table, hidden, levels, costs, certificates, fixed=fixed)
    assert pruned is not None  # no ceiling: the pass runs to its end
    return pruned


def drop_redundant_below(
    table: Table,
    hidden: frozenset[int],
    levels: Levels,
    costs: np.ndarray,
    certificates: Certificates,
    *,
    fixed: Set[int] = frozenset(),
    ceiling: float | None = None,
) -> frozenset[int] | None:
    """:func:`drop_redundant`, given up (None) as soon as its result cannot cost less
    than ``ceiling`` even if every cell still to be tried were published: a caller
    that keeps the result only below that cost (the local search) is spared the LPs
    of the rest, and decides as it would have. ``certificates`` is then left part-way.
    """
    lp = DeviationLp(table, costs)
    current = set(hidden)
    blocks = level_blocks(levels)
    # the deviation proving each level now: a cell none of them moves is published at once
    witness: dict[Block, set[int]] = {}
    for block in blocks:
        found = _witness(lp, certificates, current, block, None)
        if found is None:
            return hidden  # a level without proof: leave the pattern to the audit
        witness[block] = found
    candidates = sorted(hidden - set(levels) - set(fixed), key=lambda i: (-costs[i], i))
    # the cost now and what the cells still to be tried could take off it; a margin of
    # 1e-6 for the round-off of sums taken in another order
    cost = float(costs[list(current)].sum())
    left = float(costs[candidates].sum()) if candidates else 0.0
    for c in candidates:
        if ceiling is not None and cost - left >= ceiling + 1e-6 * max(1.0, abs(ceiling)):
            return None
        left -= float(costs[c])
        trial = current - {c}
        replaced: dict[Block, set[int]] = {}
        for block, cells in witness.items():
            if c not in cells:
                continue
            found = _witness(lp, certificates, trial, block, c)
            if found is None:
                break
            replaced[block] = found
        else:
            current = trial
            cost -= float(costs[c])
            certificates.withdraw(c)
            witness.update(replaced)
    return frozenset(current)


def _witness(
    lp: DeviationLp,
    certificates: Certificates,
    hidden: set[int],
    block: Block,
    avoid: int | None,
) -> set[int] | None:
    """The cells of a kept deviation proving ``block`` without moving ``avoid``, else of
    a new one found within ``hidden`` and kept; None when there is none (or it fails
    the exact check)."""
    p, level, upward = block
    k = certificates.witness(p, level, upward, avoid=frozenset() if avoid is None else {avoid})
    if k is None:
        found = lp.solve(hidden, p, level, upward)
        if found is None or not certificates.add(*found, hidden):
            return None
        k = certificates.witness(p, level, upward, avoid=frozenset() if avoid is None else {avoid})
        if k is None:
            return None
    return {int(i) for i in certificates.moves(k)}


class DeviationLp:
    """The cheapest deviation moving one cell, over the withheld cells linked to it: the
    pruning's LP, one per pass (a table and its costs), asked for many trial patterns.

    Its LP is the audit's over one component (:meth:`component`): every other cell
    published, so a deviation exists iff the audit interval of the cell reaches the
    level. The columns are the component's cells in sorted order, d+ then d-; the
    relations those touch, in order; costs scaled by their largest (the same optimum)."""

    def __init__(self, table: Table, costs: np.ndarray) -> None:
        a, lb, ub = table.arrays
        self._csc: sparse.csc_matrix = table.csc
        self._up = ub - a
        self._down = a - lb
        top = float(costs.max(initial=0.0))
        # one scale for HiGHS (magnitude weights span many orders); same optimum
        self._costs = costs / top if top > 0 else costs
        # one quiet HiGHS instance for every LP (a new one per LP cost a third as much
        # as solving it), the model passed anew each time (no basis carries over);
        # presolve off: these LPs of a few hundred columns solve in half the time
        # without it (measured: 12.5 -> 6.3 s of LPs on an 8 x 8 x 8 table)
        self._solver = LpSolver(presolve=False)
        #: the last pattern's components: (pattern, its cells sorted, their labels)
        self._labelled: tuple[frozenset[int], np.ndarray, np.ndarray] | None = None

    def component(self, hidden: set[int], p: int) -> np.ndarray:
        """The withheld cells reachable from ``p`` through relations (the audit LP's
        component: other withheld cells cannot move with it), sorted.

        The components of ``hidden`` are labelled at once (cells and relations as one
        bipartite graph, in C) and kept for the next call: the pruning asks for the
        component of every level's cell within the same trial pattern in turn (a search
        in Python per call was a quarter of a 10 x 10 x 10 table's time)."""
        key = frozenset(hidden)
        if self._labelled is None or self._labelled[0] != key:
            cells = np.fromiter(sorted(key), dtype=np.int64, count=len(key))
            self._labelled = (key, cells, linked_labels(self._csc, cells)[0])
        _, cells, labels = self._labelled
        at = int(np.searchsorted(cells, p))
        component: np.ndarray = cells[labels == labels[at]].astype(int)
        return component

    def solve(
        self, hidden: set[int], p: int, level: float, upward: bool
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The cheapest deviation moving ``p`` by ``level`` up (or down) with only the
        cells of its component in ``hidden`` free: ``(cells, deviation)``, the component
        (:meth:`component`) and each one's move, or None when ``p`` is not withheld, no
        deviation within the bounds exists, or the solver gave up. Unchecked: the caller
        keeps it only if :meth:`Certificates.add` accepts it."""
        if p not in hidden:
            return None
        cells = self.component(hidden, p)
        k = len(cells)
        # the columns of ``cells`` over the relations they are in, as [part, -part],
        # gathered from the table's CSC arrays as the heuristic's LPs are (scipy's slicing
        # and stacking cost as much as the LP): the same matrix, entries in the same order
        indptr, indices, data, rows = submatrix_arrays(self._csc, cells)
        if not len(rows):  # no relation holds p: it moves alone within its bounds
            lone = np.array([level if upward else -level])
            return (cells, lone) if (self._up if upward else self._down)[p] >= level else None
        hi_plus = self._up[cells].copy()
        hi_minus = self._down[cells].copy()
        lo_plus = np.zeros(k)
        lo_minus = np.zeros(k)
        at = int(np.searchsorted(cells, p))
        if upward:
            lo_plus[at], hi_minus[at] = level, 0.0
        else:
            lo_minus[at], hi_plus[at] = level, 0.0
        if hi_plus[at] < lo_plus[at] or hi_minus[at] < lo_minus[at]:
            return None
        c = self._costs[cells]
        res = self._solver.solve(
            np.concatenate([c, c]),
            (*paired_arrays(indptr, indices, data), len(rows)),
            np.zeros(len(rows)),
            np.concatenate([lo_plus, lo_minus]),
            np.concatenate([hi_plus, hi_minus]),
        )
        if res.status is not LpStatus.OPTIMAL:
            return None
        return cells, res.x[:k] - res.x[k:]
