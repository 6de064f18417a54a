"""Method choice, fall-backs, the secret perturbation, and n-D tables."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

from guard.suppression import (
    TOTAL,
    Key,
    Method,
    Protection,
    ProtectionInfeasible,
    SuppressionOptions,
    Table,
    Weight,
    choose_method,
    failures,
    suppress,
)
from guard.suppression.costs import base_weights, perturbed_costs

GridTable = Callable[[Sequence[Sequence[float]]], Table]
CubeTable = Callable[[np.ndarray], Table]

GRID = [[20, 31, 12, 40, 8], [17, 3, 25, 30, 14], [9, 22, 41, 6, 27], [33, 15, 10, 21, 5]]
SENSITIVE = {(1, 1): Protection(2, 2), (3, 4): Protection(3, 3), (0, 4): Protection(4, 4)}


def test_method_is_chosen_by_size(grid_table: GridTable) -> None:
    table = grid_table(GRID)
    assert choose_method(table, 3, SuppressionOptions()) is Method.OPTIMAL
    assert choose_method(table, 3, SuppressionOptions(optimal_limit=len(table) * 3 - 1)) is Method.HEURISTIC
    assert choose_method(table, 3, SuppressionOptions(method=Method.HEURISTIC)) is Method.HEURISTIC


def test_no_sensitive_cells_withholds_nothing(grid_table: GridTable) -> None:
    result = suppress(grid_table(GRID), {})
    assert result.suppressed == frozenset()
    assert result.cost == 0


def test_same_seed_same_pattern(grid_table: GridTable) -> None:
    table = grid_table(GRID)
    for method in Method:
        options = SuppressionOptions(method=method)
        first = suppress(table, SENSITIVE, options=options, seed=42)
        assert suppress(table, SENSITIVE, options=options, seed=42) == first


def test_patterns_vary_with_the_secret(grid_table: GridTable) -> None:
    # every rectangle through (0, 0) costs the same: the secret picks one
    table = grid_table([[10] * 4] * 4)
    options = SuppressionOptions(weight=Weight.COUNT)
    sensitive = {(0, 0): Protection(3, 3)}
    results = [suppress(table, sensitive, options=options, seed=seed) for seed in range(12)]
    assert len({r.secondary for r in results}) > 1
    assert {len(r.secondary) for r in results} == {3}
    # and without a seed the costs come from the operating system's secure source
    assert not np.array_equal(
        perturbed_costs(table, Weight.COUNT, 0.5, None), perturbed_costs(table, Weight.COUNT, 0.5, None)
    )


def test_perturbation_bounds(grid_table: GridTable) -> None:
    table = grid_table(GRID)
    w = base_weights(table, Weight.VALUE)
    c = perturbed_costs(table, Weight.VALUE, 0.5, seed=1)
    assert np.all(c >= w) and np.all(c < 1.5 * w)
    assert np.array_equal(perturbed_costs(table, Weight.VALUE, 0.0, seed=1), w)
    # empty cells are not free to withhold
    assert base_weights(grid_table([[0, 1], [2, 3]]), Weight.VALUE).min() > 0


def test_heuristic_is_never_cheaper_than_proven_optimal(grid_table: GridTable) -> None:
    table = grid_table(GRID)
    for weight in Weight:
        exact = suppress(
            table, SENSITIVE, options=SuppressionOptions(method=Method.OPTIMAL, weight=weight), seed=5
        )
        fast = suppress(
            table, SENSITIVE, options=SuppressionOptions(method=Method.HEURISTIC, weight=weight), seed=5
        )
        assert exact.optimal
        assert not fast.optimal
        assert fast.cost >= exact.cost - 1e-9
        assert failures(table, fast.suppressed, SENSITIVE) == []


def test_time_limited_milp_competes_with_heuristic(cube_table: CubeTable) -> None:
    rng = np.random.default_rng(3)
    table = cube_table(rng.integers(1, 50, size=(3, 4, 3)).astype(float))
    sensitive = {(0, 0, 0): Protection(5, 5), (2, 3, 1): Protection(5, 5), (1, 2, 2): Protection(5, 5)}
    options = SuppressionOptions(method=Method.OPTIMAL, time_limit=0.05)
    result = suppress(table, sensitive, options=options, seed=1)
    assert not result.optimal
    assert failures(table, result.suppressed, sensitive) == []


@pytest.mark.parametrize("method", list(Method))
def test_three_dimensional_table(cube_table: CubeTable, method: Method) -> None:
    rng = np.random.default_rng(11)
    table = cube_table(rng.integers(1, 30, size=(3, 3, 4)).astype(float))
    sensitive = {(0, 1, 2): Protection(4, 4), (2, 2, 0): Protection(6, 3)}
    result = suppress(table, sensitive, options=SuppressionOptions(method=method), seed=2)
    assert failures(table, result.suppressed, sensitive) == []
    # an interior cell of a 3-D table needs at least a 2x2x2 cube of withheld cells
    assert len(result.suppressed) >= 8


def test_sensitive_marginal_cell(grid_table: GridTable) -> None:
    table = grid_table(GRID)
    sensitive = {(1, TOTAL): Protection(10, 10), (TOTAL, 2): Protection(5, 5)}
    for method in Method:
        result = suppress(table, sensitive, options=SuppressionOptions(method=method), seed=4)
        assert failures(table, result.suppressed, sensitive) == []


def test_levels_beyond_the_bounds_are_capped(grid_table: GridTable) -> None:
    # (1, 1) = 3 cannot look lower than 0: a lower level of 10 means "reach 0"
    table = grid_table(GRID)
    result = suppress(table, {(1, 1): Protection(2, 10)}, seed=1)
    assert failures(table, result.suppressed, {(1, 1): Protection(2, 10)}) == []


def test_finite_upper_bounds_can_make_protection_infeasible() -> None:
    # a can rise only if b falls (the total is at its upper bound), and b only by 0.5
    cells: dict[Key, float] = {("a",): 5.0, ("b",): 5.0, (TOTAL,): 10.0}
    table = Table.from_cells(cells, lower={("b",): 4.5}, upper={("a",): 6.0, ("b",): 6.0, (TOTAL,): 10.0})
    with pytest.raises(ProtectionInfeasible, match=r"\('a',\) cannot be given its protection levels"):
        suppress(table, {("a",): Protection(3, 0)}, options=SuppressionOptions(method=Method.HEURISTIC))
    with pytest.raises(ProtectionInfeasible):
        suppress(table, {("a",): Protection(3, 0)}, options=SuppressionOptions(method=Method.OPTIMAL))
    # within the bounds' room it works
    result = suppress(table, {("a",): Protection(0.5, 0.5)}, seed=1)
    assert {("a",), ("b",)} <= result.suppressed


def test_unknown_cell_and_negative_level(grid_table: GridTable) -> None:
    table = grid_table(GRID)
    with pytest.raises(ValueError, match="not in the table"):
        suppress(table, {(9, 9): Protection(1, 1)})
    with pytest.raises(ValueError, match="must be >= 0"):
        suppress(table, {(0, 0): Protection(-1, 1)})


def test_options_are_validated() -> None:
    with pytest.raises(ValueError, match="perturbation"):
        SuppressionOptions(perturbation=-1)
    with pytest.raises(ValueError, match="time_limit"):
        SuppressionOptions(time_limit=0)
    with pytest.raises(ValueError, match="starts and nodes"):
        SuppressionOptions(starts=0)
    with pytest.raises(ValueError, match="starts and nodes"):
        SuppressionOptions(nodes=0)
