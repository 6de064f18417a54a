"""The pruning's LP (``DeviationLp.solve``) on 2-D and 3-D tables, a ROLLUP hierarchy
crossed with another dimension, and the real linked attacker view, against two oracles
that share none of its code:

* the same LP built by scipy's slicing and stacking (``hstack([part, -part])``) and
  solved by a fresh HiGHS model without presolve: the same arrays reaching HiGHS give
  the same vertex, so the deviation must be equal bit for bit;
* scipy's ``linprog(method="highs")`` on that LP: a deviation exists exactly when
  linprog finds one, at the same least cost (up to its round-off), and it is one (no
  relation broken, within the bounds, the cell moved by its level).

Written before the LP's arrays were taken from ``entries.py`` (session 20): any change
of the matrix (an entry, its order, its sign) shows here as another vertex or cost."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable

import highspy
import numpy as np
import pytest
from scipy import sparse
from scipy.optimize import linprog

from guard.highs import lp_model
from guard.suppression import TOTAL, Key, Protection, Relation, Table, Weight
from guard.suppression.certificates import Certificates
from guard.suppression.costs import perturbed_costs
from guard.suppression.entries import paired_arrays, submatrix_arrays
from guard.suppression.heuristic import solve_heuristic
from guard.suppression.model import Levels, required_levels
from guard.suppression.redundancy import DeviationLp
from tests.suppression.conftest import DEVIATION_SCALE
from tests.suppression.test_redundancy import problem

CubeTable = Callable[[np.ndarray], Table]
#: (c, [part, -part], lower, upper) of one pruning LP
Lp = tuple[np.ndarray, sparse.csc_matrix, np.ndarray, np.ndarray]


def _scipy_lp(table: Table, costs: np.ndarray, cells: np.ndarray, p: int, level: float, up: bool) -> Lp:
    """The pruning's LP over ``cells`` as scipy builds it: the columns sliced, the rows
    they touch kept in order, stacked with their negation (d+ then d-)."""
    a, lb, ub = table.arrays
    sub = table.csc[:, cells]
    part = sub[np.unique(sub.indices)]
    k = len(cells)
    hi_plus, hi_minus = (ub - a)[cells].copy(), (a - lb)[cells].copy()
    lo_plus, lo_minus = np.zeros(k), np.zeros(k)
    at = int(np.searchsorted(cells, p))
    if up:
        lo_plus[at], hi_minus[at] = level, 0.0
    else:
        lo_minus[at], hi_plus[at] = level, 0.0
    top = float(costs.max())
    c = (costs / top if top > 0 else costs)[cells]
    matrix = sparse.hstack([part, -part], format="csc")
    lower, upper = np.concatenate([lo_plus, lo_minus]), np.concatenate([hi_plus, hi_minus])
    return np.concatenate([c, c]), matrix, lower, upper


def _fresh_highs(lp: Lp) -> np.ndarray | None:
    """The deviation of a fresh HiGHS model of ``lp`` without presolve, as the pruning
    solves it; None unless optimal."""
    c, matrix, lower, upper = lp
    zero = np.zeros(matrix.shape[0])
    highs = lp_model(matrix, c, lower, upper, zero, zero)
    highs.setOptionValue("presolve", "off")
    highs.run()
    if highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    x = np.asarray(highs.getSolution().col_value)
    k = len(c) // 2
    deviation: np.ndarray = x[:k] - x[k:]
    return deviation


def _hierarchy(rng: np.random.Generator) -> Table:
    """``GROUP BY ROLLUP (region, district), CUBE (sector)``-like: districts nested in
    regions (a district's total sums to its region's), crossed with sectors."""
    sizes = rng.integers(2, 5, size=4)  # districts per region
    sectors = 5
    inner = {
        (f"R{g}", f"R{g}D{d}", s): float(np.round(rng.lognormal(3.0, 1.0)) + 1)
        for g, n in enumerate(sizes)
        for d in range(n)
        for s in range(sectors)
    }
    cells: dict[Key, float] = {}
    for (g, d, s), v in inner.items():
        for key in ((g, d, s), (g, d, TOTAL), (g, TOTAL, s), (g, TOTAL, TOTAL)):
            cells[key] = cells.get(key, 0.0) + v
        for key in ((TOTAL, TOTAL, s), (TOTAL, TOTAL, TOTAL)):
            cells[key] = cells.get(key, 0.0) + v
    return Table.from_cells(cells)


def _sensitive(table: Table, rng: np.random.Generator, share: float = 0.08) -> Levels:
    inner = [k for k in table.keys if TOTAL not in k]
    picked = rng.choice(len(inner), size=max(2, round(share * len(inner))), replace=False)
    requirements = {
        inner[i]: Protection(0.3 * table.value(inner[i]), 0.2 * table.value(inner[i])) for i in picked
    }
    return required_levels(table, requirements)


def _case(kind: str, seed: int, cube_table: CubeTable) -> tuple[Table, Levels, np.ndarray, set[int]]:
    """A table, its sensitive levels, costs and a withheld pattern to take trials from."""
    rng = np.random.default_rng(seed)
    if kind == "2d":
        table, levels = problem(cube_table, (9, 7), seed)
    elif kind == "3d":
        table, levels = problem(cube_table, (4, 5, 3), seed)
    elif kind == "hierarchy":
        table = _hierarchy(rng)
        levels = _sensitive(table, rng)
    else:  # the linked attacker view of test_deviation_scale.py and its withheld cells
        with gzip.open(DEVIATION_SCALE, "rt") as f:
            doc = json.load(f)
        keys = [tuple(TOTAL if x is None else x for x in k) for k in doc["keys"]]

        relations = [Relation(keys[t], tuple(keys[m] for m in members)) for t, members in doc["relations"]]
        table = Table.from_cells(
            dict(zip(keys, doc["values"], strict=True)),
            lower=dict(zip(keys, doc["lower"], strict=True)),
            relations=relations,
        )
        hidden = {int(i) for i in doc["hidden"]}
        picked = rng.choice(sorted(hidden), size=6, replace=False).tolist()
        values = np.asarray(table.values)
        levels = {int(p): (0.3 * values[p] + 1.0, min(0.2 * values[p], values[p])) for p in picked}
        return table, levels, perturbed_costs(table, Weight.VALUE, 0.5, seed), hidden
    costs = perturbed_costs(table, Weight.COUNT, 0.5, seed)
    hidden = set(solve_heuristic(table, levels, costs, Certificates(table)))
    return table, levels, costs, hidden


@pytest.mark.parametrize(
    ("kind", "seed", "trials"),
    [
        ("2d", 0, 12),
        ("2d", 5, 12),
        ("3d", 2, 10),
        ("3d", 7, 10),
        ("hierarchy", 1, 12),
        ("hierarchy", 4, 12),
        ("linked", 0, 2),
    ],
)
def test_the_pruning_lp_is_the_lp_scipy_builds(
    kind: str, seed: int, trials: int, cube_table: CubeTable
) -> None:
    table, levels, costs, hidden = _case(kind, seed, cube_table)
    rng = np.random.default_rng(seed + 100)
    lp = DeviationLp(table, costs)
    values = np.asarray(table.values)
    a, lb, ub = table.arrays
    top = float(costs.max())
    outcomes = {"found": 0, "none": 0}
    for t in range(trials):
        # the whole pattern first, then random parts of it: several components, some
        # levels out of reach
        trial = set(hidden) if t == 0 else {i for i in hidden if i in levels or rng.random() < 0.6}
        for p, (upper, lower) in levels.items():
            for level, up in ((upper, True), (lower, False)):
                if level <= 0:
                    continue
                found = lp.solve(trial, p, level, up)
                cells = lp.component(trial, p)
                scipy_lp = _scipy_lp(table, costs, cells, p, level, up)
                fresh = _fresh_highs(scipy_lp)
                c, matrix, lower_bounds, upper_bounds = scipy_lp
                res = linprog(
                    c,
                    A_eq=matrix,
                    b_eq=np.zeros(matrix.shape[0]),
                    bounds=np.column_stack([lower_bounds, upper_bounds]),
                    method="highs",
                )
                assert res.status in (0, 2), res.message
                assert (found is None) == (fresh is None) == (res.status == 2)
                if found is None or fresh is None:
                    outcomes["none"] += 1
                    continue
                outcomes["found"] += 1
                got_cells, deviation = found
                assert got_cells.tolist() == cells.tolist()
                assert np.array_equal(deviation, fresh)  # the same LP: the same vertex
                # linprog's optimum: the same least cost; and the deviation is one
                cost = float((costs[cells] / top) @ np.abs(deviation))
                assert abs(cost - res.fun) <= 1e-7 * max(1.0, abs(res.fun)), (cost, res.fun)
                full = np.zeros(len(values))
                full[cells] = deviation
                scale = max(1.0, float(np.abs(deviation).max()))
                assert np.abs(table.matrix @ full).max() <= 1e-7 * scale
                assert (full <= (ub - a) + 1e-7 * scale).all() and (-full <= (a - lb) + 1e-7 * scale).all()
                assert (full[p] if up else -full[p]) >= level * (1 - 1e-9)
    assert outcomes["found"] > 0
    if kind != "linked":  # random parts of a pattern leave some levels out of reach
        assert outcomes["none"] > 0


@pytest.mark.parametrize("kind", ["2d", "3d", "hierarchy", "linked"])
def test_the_arrays_reach_highs_without_a_copy(kind: str, cube_table: CubeTable) -> None:
    """HiGHS's array signature (``LpSolver.solve``) takes int32 indices and float64
    values and casts anything else by a silent copy (an int64 index past 2**31 would
    wrap): the arrays the pruning and the heuristic hand it are already of those types,
    so ``LpSolver``'s conversion returns them as they are."""
    table, _, _, hidden = _case(kind, 3, cube_table)
    cells = np.array(sorted(hidden), dtype=int)
    indptr, indices, data, rows = submatrix_arrays(table.csc, cells)
    start, index, value = paired_arrays(indptr, indices, data)
    assert len(rows) > 0 and int(start[-1]) == 2 * int(indptr[-1])
    for array in (start, index):
        assert np.asarray(array, dtype=np.int32) is array
    assert np.asarray(value, dtype=np.float64) is value
