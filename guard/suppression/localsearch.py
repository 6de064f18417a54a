"""Local search on a protecting pattern: publish one complementary cell, repair, prune.

The heuristic's pruned patterns (:mod:`~guard.suppression.heuristic`,
:mod:`~guard.suppression.redundancy`) are irredundant: no cell can be published alone.
But on 3-D tables with all margins they are far from the fewest cells (8 x 8 x 8: 94
cells where a recombination finds 80), because each deviation was routed when fewer
cells were withheld. A *move* here publishes one complementary cell ``c`` (kept
published for the move), routes the levels that lose their proof anew through what
is still withheld (the heuristic, every withheld cell free), then prunes the cells near
the change; it is kept when the pattern got cheaper. Cells are tried costliest first
by the secretly perturbed costs (the order is no function of the table alone, as in
the pruning), each once, within ``moves`` moves: a count of work, so the pattern does
not depend on the machine's load.

Pruning is restricted to the cells sharing a relation with ``c`` or a cell the repair
added (the others are left as they were): the full pruning tries every complementary
cell, about a hundred LPs per move on an 8 x 8 x 8 table, where the cells a move can
make redundant are those the new routes pass by.

Sound as the parts are: the repair's deviations and the pruning's proofs are verified
exactly (:class:`~guard.suppression.certificates.Certificates`), and the caller audits
the result as any pattern.
"""

from __future__ import annotations

from collections.abc import Set

import numpy as np
from scipy import sparse

from guard.arrays import distinct
from guard.suppression.certificates import Certificates
from guard.suppression.heuristic import solve_heuristic
from guard.suppression.model import Levels, ProtectionInfeasible
from guard.suppression.redundancy import drop_redundant_below
from guard.suppression.table import Table

__all__ = ["improve_locally"]


def improve_locally(
    table: Table,
    levels: Levels,
    costs: np.ndarray,
    hidden: frozenset[int],
    certificates: Certificates,
    *,
    forced: Set[int] = frozenset(),
    kept: Set[int] = frozenset(),
    distant: bool = True,
    moves: int = 100,
) -> tuple[frozenset[int], Certificates]:
    """The cheapest pattern the moves reach from ``hidden`` (a protecting pattern whose
    proofs ``certificates`` holds), and the certificates proving it.

    At most ``moves`` moves (each one heuristic repair and one local pruning)."""
    fixed = frozenset(forced) | frozenset(levels)
    columns = table.csc
    rows = table.matrix.tocsr()
    tried: set[int] = set()
    for _ in range(moves):
        candidates = sorted(hidden - fixed - tried, key=lambda i: (-costs[i], i))
        if not candidates:
            break
        cell = candidates[0]
        tried.add(cell)
        rest = hidden - {cell}
        proofs = certificates.inside(rest)
        try:
            repaired = solve_heuristic(
                table,
                levels,
                costs,
                proofs,
                suppressed=rest | forced,
                kept=frozenset(kept) | {cell},
                distant=distant,
            )
        except ProtectionInfeasible:
            continue  # no route around the cell: it stays
        near = _near(columns, rows, (repaired - hidden) | {cell})
        # kept only below this cost: the pruning gives up once it cannot get there
        ceiling = float(costs[list(hidden)].sum()) * (1 - 1e-9)
        pruned = drop_redundant_below(
            table, repaired, levels, costs, proofs, fixed=fixed | (repaired - near), ceiling=ceiling
        )
        if pruned is not None and costs[list(pruned)].sum() < ceiling:
            hidden, certificates = pruned, proofs
    return hidden, certificates


def _near(columns: sparse.csc_matrix, rows: sparse.csr_matrix, cells: Set[int]) -> frozenset[int]:
    """The cells sharing a relation with one of ``cells`` (a cell's relations are its
    column's rows, a relation's cells its row's columns)."""
    index = np.fromiter(cells, dtype=np.int64, count=len(cells))
    relations = distinct(columns[:, index].indices)
    return frozenset(int(i) for i in distinct(rows[relations].indices))
