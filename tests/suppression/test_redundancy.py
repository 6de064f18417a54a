"""Near-optimal patterns: redundancy elimination and the capacity-cut MILP.

Every pattern is re-checked here by an LP audit written in this file (dense scipy
``linprog``, the attacker's feasibility interval with the declared bounds), not by the
guard's own audit, certificates or solvers.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from scipy.optimize import linprog

from guard.suppression import TOTAL, Method, Protection, SuppressionOptions, Table, Weight, suppress
from guard.suppression.certificates import Certificates
from guard.suppression.costs import base_weights, perturbed_costs
from guard.suppression.cuts import solve_by_cuts
from guard.suppression.heuristic import solve_heuristic
from guard.suppression.model import Levels, required_levels
from guard.suppression.optimal import solve_optimal
from guard.suppression.redundancy import drop_redundant

CubeTable = Callable[[np.ndarray], Table]


def interval(table: Table, withheld: set[int], p: int) -> tuple[float, float]:
    """Independent audit: the attacker's interval for cell ``p`` (low, high) with every
    cell outside ``withheld`` fixed at its value, the relations and the declared bounds
    (an unbounded end is infinite)."""
    a, lb, ub = (np.array(v, dtype=float) for v in (table.values, table.lower, table.upper))
    index = {key: i for i, key in enumerate(table.keys)}
    rows = []
    for relation in table.relations:
        row = np.zeros(len(a))
        row[index[relation.total]] = 1.0
        for member in relation.members:
            row[index[member]] -= 1.0
        rows.append(row)
    matrix = np.array(rows)
    bounds = [(lb[i], ub[i]) if i in withheld else (a[i], a[i]) for i in range(len(a))]
    ends = []
    for sign in (1.0, -1.0):
        c = np.zeros(len(a))
        c[p] = -sign  # maximise sign * x_p
        res = linprog(c, A_eq=matrix, b_eq=np.zeros(len(rows)), bounds=bounds, method="highs")
        if res.status == 3:
            ends.append(np.inf)
            continue
        assert res.status == 0, res.message
        ends.append(-res.fun)
    return -ends[1], ends[0]


def reaches(table: Table, withheld: set[int], p: int, levels: tuple[float, float]) -> bool:
    """Independent audit: ``p`` can move up and down by its levels (``interval``)."""
    if p not in withheld:
        return False
    low, high = interval(table, withheld, p)
    value = float(table.values[p])
    upper, lower = levels
    tol = 1e-6 * max(1.0, abs(value), upper, lower)
    return bool(high >= value + upper - tol and low <= value - lower + tol)


def protected(table: Table, withheld: set[int], levels: Levels) -> bool:
    return all(reaches(table, withheld, p, lv) for p, lv in levels.items())


def problem(cube_table: CubeTable, shape: tuple[int, ...], seed: int) -> tuple[Table, Levels]:
    """Skewed magnitudes with every margin; about 8 % of the inner cells sensitive."""
    rng = np.random.default_rng(seed)
    table = cube_table(np.round(rng.lognormal(3.0, 1.0, size=shape)) + 1)
    inner = [k for k in table.keys if TOTAL not in k]
    picked = rng.choice(len(inner), size=max(2, round(0.08 * len(inner))), replace=False)
    requirements = {
        inner[i]: Protection(0.3 * table.value(inner[i]), 0.2 * table.value(inner[i])) for i in picked
    }
    return table, required_levels(table, requirements)


SHAPES = [((10, 10), 0), ((8, 6), 2), ((4, 4, 3), 1), ((5, 5, 4), 2)]


@pytest.fixture(scope="module", params=SHAPES, ids=lambda s: "x".join(map(str, s[0])))
def pruned(request: pytest.FixtureRequest, cube_table: CubeTable) -> tuple[Table, Levels, set[int], set[int]]:
    """A heuristic pattern and what redundancy elimination keeps of it."""
    shape, seed = request.param
    table, levels = problem(cube_table, shape, seed)
    costs = perturbed_costs(table, Weight.COUNT, 0.5, seed)
    certificates = Certificates(table)
    hidden = solve_heuristic(table, levels, costs, certificates)
    kept = drop_redundant(table, hidden, levels, costs, certificates)
    return table, levels, set(hidden), set(kept)


def test_pruned_pattern_passes_the_independent_audit(
    pruned: tuple[Table, Levels, set[int], set[int]],
) -> None:
    table, levels, before, after = pruned
    assert after < before
    assert set(levels) <= after
    assert protected(table, after, levels)


def test_pruned_pattern_needs_every_complementary_cell(
    pruned: tuple[Table, Levels, set[int], set[int]],
) -> None:
    # mutation: publishing any one more cell lets some sensitive cell fail the audit
    table, levels, _, after = pruned
    complementary = after - set(levels)
    assert complementary
    for cell in complementary:
        assert not protected(table, after - {cell}, levels), f"cell {table.keys[cell]!r} was not needed"


def test_pruning_drops_cells_on_3d_heuristic_patterns(cube_table: CubeTable) -> None:
    # the heuristic routes later deviations through cells withheld for earlier ones
    dropped = 0
    for seed in (2, 3):
        table, levels = problem(cube_table, (5, 5, 4), seed)
        costs = perturbed_costs(table, Weight.COUNT, 0.5, seed)
        certificates = Certificates(table)
        hidden = solve_heuristic(table, levels, costs, certificates)
        dropped += len(hidden) - len(drop_redundant(table, hidden, levels, costs, certificates))
    assert dropped >= 10


def test_withdrawn_certificates_prove_nothing(cube_table: CubeTable) -> None:
    table, levels = problem(cube_table, (5, 5), 7)
    costs = perturbed_costs(table, Weight.COUNT, 0.5, 7)
    certificates = Certificates(table)
    hidden = solve_heuristic(table, levels, costs, certificates)
    p = min(levels)
    upper = levels[p][0]
    k = certificates.witness(p, upper, True)
    assert k is not None
    moved = [int(i) for i in certificates.moves(k) if int(i) != p]
    assert set(moved) <= hidden
    # a deviation through a cell about to be published is no witness for that case ...
    assert certificates.witness(p, upper, True, avoid={moved[0]}) != k
    # ... and once it is published, for none
    certificates.withdraw(moved[0])
    assert certificates.witness(p, upper, True) != k


@pytest.mark.parametrize(("shape", "seed"), [((5, 5), 11), ((3, 3, 2), 12)])
def test_cuts_reach_the_full_milps_optimum(cube_table: CubeTable, shape: tuple[int, ...], seed: int) -> None:
    table, levels = problem(cube_table, shape, seed)
    costs = perturbed_costs(table, Weight.COUNT, 0.5, seed)
    full = solve_optimal(table, levels, costs, time_limit=30)
    cut = solve_by_cuts(table, levels, costs, time_limit=30)
    assert full is not None and full.proven
    assert cut is not None and cut.complete and cut.proven
    assert costs[list(cut.suppressed)].sum() == pytest.approx(costs[list(full.suppressed)].sum(), rel=1e-6)
    assert cut.bound <= costs[list(cut.suppressed)].sum() + 1e-6
    assert protected(table, set(cut.suppressed), levels)
    # each level's deviation moves only withheld cells, keeps the relations, reaches it
    for (p, upward), d in cut.deviations.items():
        assert set(np.flatnonzero(np.abs(d) > 1e-9)) <= cut.suppressed
        assert np.abs(table.matrix @ d).max() < 1e-6 * max(1.0, np.abs(d).max())
        assert (d[p] if upward else -d[p]) >= levels[p][0 if upward else 1] * (1 - 1e-6)


def test_a_time_limited_cut_loop_yields_a_partial_pattern_or_nothing(cube_table: CubeTable) -> None:
    table, levels = problem(cube_table, (5, 5, 4), 13)
    costs = base_weights(table, Weight.COUNT)
    outcome = solve_by_cuts(table, levels, costs, time_limit=0.05)
    assert outcome is None or outcome.bound <= costs.sum()


@pytest.mark.parametrize(("shape", "seed"), [((9, 9), 21), ((5, 4, 5), 22)])
def test_suppress_above_the_milp_limit_is_audited_and_irredundant(
    cube_table: CubeTable, shape: tuple[int, ...], seed: int
) -> None:
    # the heuristic, pruned, then improved by the cut loop: still protected, and no
    # complementary cell can be published
    table, levels = problem(cube_table, shape, seed)
    requirements = {table.keys[p]: Protection(*lv) for p, lv in levels.items()}
    options = SuppressionOptions(weight=Weight.COUNT, optimal_limit=0, time_limit=1.0)
    result = suppress(table, requirements, options=options, seed=seed)
    withheld = {table.index(k) for k in result.suppressed}
    assert protected(table, withheld, levels)
    if not result.optimal:
        for cell in withheld - set(levels):
            assert not protected(table, withheld - {cell}, levels)
    assert result.method in (Method.OPTIMAL, Method.HEURISTIC)


def test_pattern_stays_secret_dependent(cube_table: CubeTable) -> None:
    # seed 004: above the MILP limit too (heuristic, pruning, cuts), the secret picks
    # one of the equally good patterns
    table = cube_table(np.full((5, 5), 10.0))
    requirements = {(0, 0): Protection(3, 3)}
    options = SuppressionOptions(weight=Weight.COUNT, optimal_limit=0, time_limit=1.0)
    results = [suppress(table, requirements, options=options, seed=s) for s in range(8)]
    assert len({r.suppressed for r in results}) > 1
    assert all(
        protected(table, {table.index(k) for k in r.suppressed}, required_levels(table, requirements))
        for r in results
    )


# (shape, seed) of problem() where the pruned heuristic withholds one cell more than the
# proven optimum (6 cells against 7 on both)
BEATEN = [((6, 6), 2), ((7, 5), 2)]


@pytest.mark.parametrize(("shape", "seed"), BEATEN)
def test_cut_loop_started_from_a_costlier_pattern_proves_the_optimum(
    cube_table: CubeTable, shape: tuple[int, ...], seed: int
) -> None:
    # HiGHS 1.16 could hand back the start as its solution while reporting the cheaper
    # optimum: the loop then stopped at once, "proven", with the start's cells
    table, levels = problem(cube_table, shape, seed)
    costs = base_weights(table, Weight.COUNT)
    start = solve_heuristic(table, levels, costs, Certificates(table))
    full = solve_optimal(table, levels, costs, time_limit=30)
    cut = solve_by_cuts(table, levels, costs, start=start, time_limit=30)
    assert full is not None and full.proven
    assert cut is not None and cut.complete and cut.proven
    optimum = costs[list(full.suppressed)].sum()
    assert costs[list(cut.suppressed)].sum() == pytest.approx(optimum)
    assert costs[list(start)].sum() > optimum
    assert cut.bound <= optimum + 1e-6
    assert protected(table, set(cut.suppressed), levels)


@pytest.mark.parametrize(("shape", "seed"), BEATEN)
def test_suppress_above_the_milp_limit_reaches_the_optimum(
    cube_table: CubeTable, shape: tuple[int, ...], seed: int
) -> None:
    # the heuristic's pruned pattern (one cell too many) improved by the cut loop to the
    # full MILP's proven optimum; the released pattern passes the independent audit
    table, levels = problem(cube_table, shape, seed)
    requirements = {table.keys[p]: Protection(*lv) for p, lv in levels.items()}
    costs = base_weights(table, Weight.COUNT)
    full = solve_optimal(table, levels, costs, time_limit=30)
    assert full is not None and full.proven
    options = SuppressionOptions(weight=Weight.COUNT, optimal_limit=0, perturbation=0, time_limit=2.0)
    result = suppress(table, requirements, options=options, seed=seed)
    withheld = {table.index(k) for k in result.suppressed}
    assert len(withheld) == len(full.suppressed)
    assert protected(table, withheld, levels)


def test_a_loose_gap_still_returns_a_protecting_pattern_and_a_valid_bound(cube_table: CubeTable) -> None:
    # rounds stopped 5 % from the master's optimum: the first complete pattern is kept and
    # the loop goes on at the proof's gap; the bound never exceeds the proven optimum
    table, levels = problem(cube_table, (8, 8), 6)
    costs = base_weights(table, Weight.COUNT)
    full = solve_optimal(table, levels, costs, time_limit=30)
    cut = solve_by_cuts(table, levels, costs, time_limit=30, gap=0.05)
    assert full is not None and full.proven and cut is not None and cut.complete
    optimum = costs[list(full.suppressed)].sum()
    assert cut.bound <= optimum + 1e-6
    assert costs[list(cut.suppressed)].sum() <= 1.05 * optimum + 1e-9
    assert protected(table, set(cut.suppressed), levels)
