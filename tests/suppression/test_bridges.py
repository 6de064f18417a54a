"""Bridge rows of the capacity-cut master (guard/suppression/bridges.py).

Oracles written here: which withheld cells are alone in a relation, from the table's
relations by key; that such a cell's feasibility interval is a point, by a dense scipy
LP; and that the cut loop proves the same optimal cost with and without the rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from guard.suppression import Protection, SuppressionOptions, Table, Weight, improvement, suppress
from guard.suppression.bridges import bridge_rows
from guard.suppression.costs import perturbed_costs
from guard.suppression.cuts import solve_by_cuts
from tests.suppression.test_redundancy import interval, problem, protected

CubeTable = Callable[[np.ndarray], Table]


def _alone(table: Table, withheld: set[int]) -> list[int]:
    """Per relation, each withheld cell whose relation has no other withheld cell."""
    index = {key: i for i, key in enumerate(table.keys)}
    found = []
    for relation in table.relations:
        cells = [index[relation.total], *(index[m] for m in relation.members)]
        inside = [i for i in cells if i in withheld]
        if len(inside) == 1:
            found.append(inside[0])
    return found


@pytest.mark.parametrize(("shape", "seed"), [((4, 4, 3), 1), ((6, 5), 3)])
def test_a_violated_row_is_a_withheld_cell_alone_in_a_relation(
    cube_table: CubeTable, shape: tuple[int, ...], seed: int
) -> None:
    table, levels = problem(cube_table, shape, seed)
    matrix, lower = bridge_rows(table, levels)
    rng = np.random.default_rng(seed)
    a = np.array(table.values, dtype=float)
    checked = 0
    for density in (0.15, 0.3, 0.5):
        withheld = set(levels) | {int(i) for i in np.flatnonzero(rng.random(len(table)) < density)}
        y = np.zeros(len(table))
        y[list(withheld)] = 1.0
        violated = int(np.sum(matrix @ y < lower - 1e-9))
        alone = _alone(table, withheld)
        # one row per (relation, withheld cell alone in it), no other row violated
        assert violated == len(alone)
        for i in alone[:4]:
            low, high = interval(table, withheld, i)
            assert high - low <= 1e-6 * max(1.0, abs(a[i]))  # pinned: publishing it loses nothing
            checked += 1
    assert checked > 0


def test_forced_and_kept_cells_get_no_row_of_their_own(cube_table: CubeTable) -> None:
    table, levels = problem(cube_table, (4, 4, 3), 1)
    free = [i for i in range(len(table)) if i not in levels]
    forced, kept = {free[0]}, {free[1]}
    every, _ = bridge_rows(table, levels)
    some, _ = bridge_rows(table, levels, forced, kept)
    relations_of = sum(1 for r in table.relation_cells for i in r if i in forced | kept)
    assert every.shape[0] - some.shape[0] == relations_of
    # a forced cell alone in its relations violates no row: it may stay withheld alone
    y = np.zeros(len(table))
    y[list(forced)] = 1.0
    matrix, lower = bridge_rows(table, {}, forced, kept)
    assert np.all(matrix @ y >= lower - 1e-9)


@pytest.mark.parametrize(("shape", "seed"), [((4, 3, 3), 5), ((5, 4), 2), ((4, 4, 3), 1)])
def test_the_rows_keep_the_optimum(cube_table: CubeTable, shape: tuple[int, ...], seed: int) -> None:
    table, levels = problem(cube_table, shape, seed)
    costs = perturbed_costs(table, Weight.COUNT, 0.5, seed)
    outcomes = [solve_by_cuts(table, levels, costs, time_limit=120.0, bridges=b) for b in (False, True)]
    for outcome in outcomes:
        assert outcome is not None and outcome.complete and outcome.proven
        assert protected(table, set(outcome.suppressed), levels)
    plain, bridged = (float(costs[list(o.suppressed)].sum()) for o in outcomes if o is not None)
    assert bridged == pytest.approx(plain, rel=1e-6)


@pytest.mark.parametrize(("shape", "seed", "rows"), [((5, 5, 4), 2, True), ((8, 6), 2, False)])
def test_the_rows_only_on_3d_tables(
    cube_table: CubeTable, monkeypatch: pytest.MonkeyPatch, shape: tuple[int, ...], seed: int, rows: bool
) -> None:
    # 2-D tables keep the cut loop of before (on 20 x 20 the rows cost a cell at 2 s)
    table, levels = problem(cube_table, shape, seed)
    requirements = {table.keys[p]: Protection(*lv) for p, lv in levels.items()}
    seen: list[bool] = []
    real = improvement.solve_by_cuts

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["bridges"])
        return real(*args, **kwargs)

    monkeypatch.setattr(improvement, "solve_by_cuts", spy)
    # starts=1: no recombination, so the cut loop runs first on the 3-D table
    options = SuppressionOptions(weight=Weight.COUNT, optimal_limit=0, starts=1, moves=0, time_limit=1.0)
    suppress(table, requirements, options=options, seed=seed)
    assert seen == [rows]
