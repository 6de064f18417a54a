"""The pruning's LP parts made faster (session 16) against their plain versions.

The components, the LP's matrix and the certificates' ``avoid`` test were rewritten for
speed only: each is compared here with a direct implementation of what it replaced
(a search in Python, scipy's slicing and stacking, a search of each deviation's cells),
so a change of any decision shows up as a difference, not only as a worse pattern."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from guard.suppression import Table, Weight
from guard.suppression.certificates import Certificates
from guard.suppression.costs import perturbed_costs
from guard.suppression.heuristic import solve_heuristic
from guard.suppression.redundancy import DeviationLp, drop_redundant, drop_redundant_below
from tests.suppression.test_pruning_lp_oracles import _fresh_highs, _scipy_lp
from tests.suppression.test_redundancy import problem

CubeTable = Callable[[np.ndarray], Table]


def _bfs(table: Table, hidden: set[int], p: int) -> list[int]:
    """The withheld cells reachable from ``p`` through relations, searched one by one."""
    columns, rows = table.csc, table.matrix.tocsr()
    seen, stack = {p}, [p]
    while stack:
        i = stack.pop()
        for r in columns.indices[columns.indptr[i] : columns.indptr[i + 1]]:
            for j in rows.indices[rows.indptr[r] : rows.indptr[r + 1]]:
                if int(j) in hidden and int(j) not in seen:
                    seen.add(int(j))
                    stack.append(int(j))
    return sorted(seen)


def _plain_lp(
    table: Table, costs: np.ndarray, cells: np.ndarray, p: int, level: float, up: bool
) -> np.ndarray | None:
    """The pruning's LP built by scipy slicing and stacking, solved by a fresh model."""
    return _fresh_highs(_scipy_lp(table, costs, cells, p, level, up))


@pytest.mark.parametrize("seed", [1, 3])
def test_components_and_lps_match_their_plain_versions(cube_table: CubeTable, seed: int) -> None:
    table, levels = problem(cube_table, (5, 4, 4), seed)
    costs = perturbed_costs(table, Weight.COUNT, 0.5, seed)
    hidden = set(solve_heuristic(table, levels, costs, Certificates(table)))
    rng = np.random.default_rng(seed)
    lp = DeviationLp(table, costs)
    compared = infeasible = 0
    for _ in range(30):
        # random subsets of the pattern: several components, some levels out of reach
        trial = {i for i in hidden if i in levels or rng.random() < 0.7}
        for p, (upper, lower) in levels.items():
            cells = lp.component(trial, p)
            assert cells.tolist() == _bfs(table, trial, p)
            for level, up in ((upper, True), (lower, False)):
                found = lp.solve(trial, p, level, up)
                plain = _plain_lp(table, costs, cells, p, level, up)
                assert (found is None) == (plain is None)
                if found is None or plain is None:
                    infeasible += 1
                    continue
                assert found[0].tolist() == cells.tolist()
                assert np.array_equal(found[1], plain)  # the same LP: the same vertex
                compared += 1
    assert compared > 50 and infeasible > 10  # both outcomes were exercised


def test_avoid_skips_exactly_the_deviations_moving_a_cell(cube_table: CubeTable) -> None:
    table, levels = problem(cube_table, (5, 5, 4), 2)
    costs = perturbed_costs(table, Weight.COUNT, 0.5, 2)
    certificates = Certificates(table)
    hidden = solve_heuristic(table, levels, costs, certificates)
    skipped = 0
    for p, (upper, lower) in levels.items():
        for cell in sorted(hidden - {p}):
            for level, up in ((upper, True), (lower, False)):
                k = certificates.witness(p, level, up, avoid={cell})
                # the plain test: the first deviation covering p whose cells miss ``cell``
                plain = next(
                    (
                        j
                        for j, (support, _) in enumerate(certificates.deviations())
                        if cell not in support.tolist() and _covers(table, certificates, j, p, level, up)
                    ),
                    None,
                )
                assert k == plain
                skipped += certificates.witness(p, level, up) is not None and k is None
    assert skipped > 0  # some levels lose their only proof when a cell is avoided


def _covers(table: Table, certificates: Certificates, k: int, p: int, level: float, up: bool) -> bool:
    """Whether deviation ``k`` scaled to move ``p`` by ``level`` keeps every cell it moves
    within the table's bounds (up to the certificates' relative round-off, 1e-7), cell by
    cell."""
    support, values = certificates.deviations()[k]
    if p not in support.tolist():
        return False
    t = (level if up else -level) / float(values[np.searchsorted(support, p)])
    a, lb, ub = table.arrays
    moves = t * values
    slack = 1 + 1e-7
    return bool((moves <= (ub - a)[support] * slack).all() and (-moves <= (a - lb)[support] * slack).all())


@pytest.mark.parametrize("seed", [2, 4])
def test_pruning_below_a_ceiling_gives_up_only_when_it_cannot_get_there(
    cube_table: CubeTable, seed: int
) -> None:
    table, levels = problem(cube_table, (5, 5, 4), seed)
    costs = perturbed_costs(table, Weight.COUNT, 0.5, seed)
    start = Certificates(table)
    hidden = solve_heuristic(table, levels, costs, start)
    full = drop_redundant(table, hidden, levels, costs, start.inside(hidden))
    cost = float(costs[list(full)].sum())
    gave_up = 0
    for ceiling in (cost * 0.9, cost - 1e-3, cost, cost + 1e-3, float(costs[list(hidden)].sum()) + 1):
        below = drop_redundant_below(table, hidden, levels, costs, start.inside(hidden), ceiling=ceiling)
        if below is None:
            assert cost >= ceiling  # the whole pass would not have got below it either
            gave_up += 1
        else:
            assert below == full  # the same pass, the same cells
    assert gave_up >= 1  # a ceiling well under the pruned cost is given up on
