"""The kept HiGHS instance (``LpSolver``) returns, LP after LP, what a fresh instance per
LP (``solve_lp``, the oracle) returns, bit for bit: the heuristic's deviations, and so
the cells it withholds and the proofs it hands on, do not depend on the instance being
reused. On the real attacker view of ``test_deviation_scale.py``, with deviation LPs
of every size the heuristic builds (box plus withheld cells), an infeasible one between
them, in an order where each model is smaller or larger than the last."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy import sparse

from guard.highs import LpSolver, LpStatus, solve_lp
from guard.suppression.deviation import DeviationProblem, cheapest_deviation
from guard.suppression.entries import paired_arrays, submatrix_arrays
from guard.suppression.table import Table


@pytest.fixture(scope="module")
def table(scale_table: Table) -> Table:
    return scale_table


def _lps(table: Table, seed: int) -> list[tuple[np.ndarray, sparse.csc_matrix, np.ndarray, np.ndarray]]:
    """(cost, [A_S, -A_S], lower, upper) of deviation LPs over the boxes of random cells."""
    rng = np.random.default_rng(seed)
    problem = DeviationProblem.of(table, set())
    n = len(table)
    costs = rng.random(n)
    hidden = np.sort(rng.choice(n, size=n // 5, replace=False))
    costs[hidden] = 0.0
    lps = []
    for p in rng.choice(n, size=12, replace=False).tolist():
        columns = problem.start(p, costs, set(hidden.tolist()), distant=bool(rng.integers(2)))
        indptr, indices, data, rows = submatrix_arrays(table.csc, columns)
        paired = sparse.csc_matrix(
            paired_arrays(indptr, indices, data)[::-1], shape=(len(rows), 2 * len(columns))
        )
        k = len(columns)
        lower, upper = np.zeros(2 * k), np.concatenate([problem.up_room[columns], problem.down_room[columns]])
        at = int(np.searchsorted(columns, p))
        # up (no upper bound: feasible) or down by up to twice the cell's value (beyond
        # its room down to 0: infeasible)
        level = float(rng.uniform(0.1, 2.0)) * max(1.0, float(table.values[p]))
        move, still = (at, k + at) if rng.integers(2) else (k + at, at)
        lower[move] = level
        upper[still] = 0.0
        lps.append((np.concatenate([costs[columns], costs[columns]]), paired, lower, upper))
    return lps


@pytest.mark.parametrize("seed", range(3))
def test_a_kept_instance_solves_each_lp_as_a_fresh_one(table: Table, seed: int) -> None:
    solver = LpSolver()
    statuses = set()
    for cost, matrix, lower, upper in _lps(table, seed):
        rhs = np.zeros(matrix.shape[0])
        fresh = solve_lp(cost, matrix, rhs, lower, upper)
        kept = solver.solve(
            cost, (matrix.indptr, matrix.indices, matrix.data, matrix.shape[0]), rhs, lower, upper
        )
        statuses.add(fresh.status)
        assert kept.status is fresh.status
        assert np.array_equal(kept.x, fresh.x)
        assert np.array_equal(kept.row_duals, fresh.row_duals)
        assert kept.objective == fresh.objective or (np.isnan(kept.objective) and np.isnan(fresh.objective))
    assert LpStatus.OPTIMAL in statuses and LpStatus.INFEASIBLE in statuses


@pytest.mark.parametrize("distant", [False, True])
def test_the_heuristics_deviation_without_presolve_is_an_optimum_of_the_same_lp(
    table: Table, distant: bool
) -> None:
    """The heuristic's solver skips presolve (another optimal point, fewer cells moved):
    each deviation it returns is a deviation (``A d = 0``, within the bounds, ``p``
    moved by its level) of the same least cost as the one with presolve (the oracle)."""
    rng = np.random.default_rng(5)
    without = DeviationProblem.of(table, set())
    with_presolve = replace(without, solver=LpSolver())
    n = len(table)
    costs = rng.random(n) + 0.01
    hidden = {int(i) for i in rng.choice(n, size=n // 5, replace=False)}
    costs[list(hidden)] = 0.0
    values = np.asarray(table.values)
    found = 0
    for p in rng.choice(n, size=25, replace=False).tolist():
        level = float(rng.uniform(0.05, 0.5)) * max(1.0, values[p])
        upward = bool(rng.integers(2))
        got = cheapest_deviation(without, costs, p, level, upward, hidden=hidden, distant=distant, rounds=0)
        oracle = cheapest_deviation(
            with_presolve, costs, p, level, upward, hidden=hidden, distant=distant, rounds=0
        )
        assert (got is None) == (oracle is None)
        if got is None or oracle is None:
            continue
        found += 1
        scale = max(1.0, float(np.abs(got).max()))
        assert np.abs(table.matrix @ got).max() <= 1e-7 * scale
        assert (values + got >= np.asarray(table.lower) - 1e-7 * scale).all()
        assert (got[p] if upward else -got[p]) >= level * (1 - 1e-9)
        cost, best = float(costs @ np.abs(got)), float(costs @ np.abs(oracle))
        assert cost <= best * (1 + 1e-7) + 1e-9 and best <= cost * (1 + 1e-7) + 1e-9
    assert found >= 10


def test_an_lp_past_highs_32_bit_counts_is_not_solved_rather_than_wrapped() -> None:
    """HiGHS counts in 32 bits and the arrays go to it as int32: past 2**31 - 1 an index
    would wrap silently into another model and a count raised a TypeError. Such an LP is
    not passed: it is FAILED, which every caller treats as not solved (the cell is
    withheld), and the solver still works."""
    solver = LpSolver()
    empty = np.zeros(0)
    columns = (np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int64), empty, 1 << 31)
    wide = solver.solve(np.ones(1), columns, np.zeros(1), np.zeros(1), np.ones(1))
    assert wide.status is LpStatus.FAILED
    fine = solver.solve(
        np.ones(1),
        (np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int64), empty, 0),
        empty,
        np.zeros(1),
        np.ones(1),
    )
    assert fine.status is LpStatus.OPTIMAL and fine.x.tolist() == [0.0]
