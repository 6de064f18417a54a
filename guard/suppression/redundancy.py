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

from guard.highs import LpStatus, solve_lp
from guard.suppression.certificates import Certificates
from guard.suppression.model import Block, Levels, level_blocks
from guard.suppression.table import Table

__all__ = ["drop_redundant"]


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
    lp = _DeviationLp(table, costs)
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
    for c in candidates:
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
            certificates.withdraw(c)
            witness.update(replaced)
    return frozenset(current)


def _witness(
    lp: _DeviationLp,
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


class _DeviationLp:
    """The cheapest deviation moving one cell, over the withheld cells linked to it."""

    def __init__(self, table: Table, costs: np.ndarray) -> None:
        a, lb, ub = table.arrays
        self._csr: sparse.csr_matrix = table.matrix.tocsr()
        self._csc: sparse.csc_matrix = table.csc
        self._up = ub - a
        self._down = a - lb
        top = float(costs.max(initial=0.0))
        # one scale for HiGHS (magnitude weights span many orders); same optimum
        self._costs = costs / top if top > 0 else costs

    def _component(self, hidden: set[int], p: int) -> np.ndarray:
        """The withheld cells reachable from ``p`` through relations (the audit LP's
        component: other withheld cells cannot move with it)."""
        seen = {p}
        stack = [p]
        while stack:
            i = stack.pop()
            for r in self._csc.indices[self._csc.indptr[i] : self._csc.indptr[i + 1]]:
                for j in self._csr.indices[self._csr.indptr[r] : self._csr.indptr[r + 1]]:
                    j = int(j)
                    if j in hidden and j not in seen:
                        seen.add(j)
                        stack.append(j)
        return np.array(sorted(seen), dtype=int)

    def solve(
        self, hidden: set[int], p: int, level: float, upward: bool
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """``(cells, deviation)`` or None (no deviation, or the solver gave up)."""
        if p not in hidden:
            return None
        cells = self._component(hidden, p)
        k = len(cells)
        sub = self._csc[:, cells]
        rows = np.unique(sub.indices)
        if not len(rows):  # no relation holds p: it moves alone within its bounds
            lone = np.array([level if upward else -level])
            return (cells, lone) if (self._up if upward else self._down)[p] >= level else None
        part = sub[rows]
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
        res = solve_lp(
            np.concatenate([c, c]),
            sparse.hstack([part, -part], format="csc"),
            np.zeros(len(rows)),
            np.concatenate([lo_plus, lo_minus]),
            np.concatenate([hi_plus, hi_minus]),
        )
        if res.status is not LpStatus.OPTIMAL:
            return None
        return cells, res.x[:k] - res.x[k:]
