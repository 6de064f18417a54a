"""Local search on 3-D patterns: publish a complementary cell, repair, prune nearby.

Every pattern is re-checked by the independent scipy audit of test_redundancy
(``protected``), not by the guard's certificates."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from guard.suppression import Protection, SuppressionOptions, Table, Weight, suppress
from guard.suppression.certificates import Certificates
from guard.suppression.costs import perturbed_costs
from guard.suppression.heuristic import solve_heuristic
from guard.suppression.localsearch import improve_locally
from guard.suppression.model import Levels
from guard.suppression.redundancy import drop_redundant
from tests.suppression.test_redundancy import problem, protected

CubeTable = Callable[[np.ndarray], Table]


def _start(
    cube_table: CubeTable, seed: int
) -> tuple[Table, Levels, np.ndarray, frozenset[int], Certificates]:
    """A 5 x 5 x 4 table with all margins and the heuristic's pruned pattern."""
    table, levels = problem(cube_table, (5, 5, 4), seed)
    costs = perturbed_costs(table, Weight.COUNT, 0.5, seed)
    certificates = Certificates(table)
    hidden = solve_heuristic(table, levels, costs, certificates)
    return table, levels, costs, drop_redundant(table, hidden, levels, costs, certificates), certificates


@pytest.mark.parametrize("seed", [2, 4])
def test_moves_find_a_cheaper_pattern_that_still_protects(cube_table: CubeTable, seed: int) -> None:
    # the pruned heuristic pattern is irredundant, yet moves publish 4-6 of its cells
    table, levels, costs, hidden, certificates = _start(cube_table, seed)
    assert protected(table, set(hidden), levels)
    found, proofs = improve_locally(table, levels, costs, hidden, certificates, moves=30)
    assert costs[list(found)].sum() < costs[list(hidden)].sum() - 1e-9
    assert len(found) < len(hidden)
    assert set(levels) <= found
    assert protected(table, set(found), levels)
    # the certificates returned prove the pattern returned
    assert all(proofs.proven(p, lv) for p, lv in levels.items())
    assert all(set(cells.tolist()) <= found for cells, _ in proofs.deviations(within=set(found)))


def test_no_moves_and_forced_cells(cube_table: CubeTable) -> None:
    table, levels, costs, hidden, certificates = _start(cube_table, 2)
    same, _ = improve_locally(table, levels, costs, hidden, certificates, moves=0)
    assert same == hidden
    # cells forced by an earlier release are never published by a move
    forced = frozenset(sorted(hidden - set(levels))[:3])
    found, _ = improve_locally(table, levels, costs, hidden, certificates.inside(hidden), forced=forced)
    assert forced <= found
    assert protected(table, set(found), levels)


def test_suppress_with_moves_is_no_costlier_and_audited(cube_table: CubeTable) -> None:
    # through suppress(): the local search runs last on 3-D tables; the same table and
    # secret give the same pattern twice (moves are counted, not timed)
    table, levels = problem(cube_table, (5, 5, 4), 4)
    requirements = {table.keys[p]: Protection(*lv) for p, lv in levels.items()}
    base = SuppressionOptions(weight=Weight.COUNT, optimal_limit=0, starts=1, cut_limit=0, time_limit=2.0)
    without = suppress(
        table, requirements, options=SuppressionOptions(**{**base.__dict__, "moves": 0}), seed=4
    )
    with_moves = suppress(table, requirements, options=base, seed=4)
    again = suppress(table, requirements, options=base, seed=4)
    assert with_moves.suppressed == again.suppressed
    assert len(with_moves.suppressed) < len(without.suppressed)
    assert protected(table, {table.index(k) for k in with_moves.suppressed}, levels)
