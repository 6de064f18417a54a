"""Seed 004's matching attack: against a deterministic suppression algorithm it narrows
a sensitive cell's interval below its protection level; against the guard's secretly
perturbed costs it does not.

The attacker (Kerckhoffs) knows the algorithm and its parameters (threshold rule,
protection levels, weights). From the published table they enumerate every candidate
table: non-negative integer values of the withheld cells consistent with the published
cells and the relations (seed 004 §3.2). Against a deterministic algorithm they keep
the candidates on which re-running it reproduces the published pattern (Algorithm 1);
the range of a cell over the kept candidates is its *effective* interval. Without the
secret seed they can only drop the candidates for which no perturbation of the costs
could have produced the pattern.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pytest
from scipy.linalg import qr

from guard.rules import CellContributions, MinimumFrequency, RuleVerdict
from guard.suppression import (
    TOTAL,
    Key,
    Method,
    SuppressionOptions,
    Table,
    Weight,
    audit,
    failures,
    required_levels,
    suppress,
)
from guard.suppression.costs import base_weights
from guard.suppression.optimal import solve_optimal

GridTable = Callable[[Sequence[Sequence[float]]], Table]

#: frequency tables (counts) of seed 004's experiments: threshold 5, levels half the
#: count but at least 1 (a level below 1 protects no integer count)
RULE = MinimumFrequency(threshold=5, fraction=0.5, floor=1.0)
PERTURBATION = 0.5
GRIDS = [
    [[24, 4, 24], [15, 3, 12], [16, 18, 5]],
    [[11, 17, 17], [36, 4, 11], [35, 21, 22]],
    [[4, 17, 10], [17, 23, 0], [18, 27, 12]],
]
Intervals = dict[Key, tuple[float, float]]


def sensitive(table: Table) -> dict[Key, RuleVerdict]:
    """The threshold rule on every inner cell (a count is its number of respondents)."""
    out = {}
    for key, value in zip(table.keys, table.values, strict=True):
        if TOTAL not in key:
            count = round(value)
            verdict = RULE(CellContributions(float(count), count))
            if verdict.sensitive:
                out[key] = verdict
    return out


def release(table: Table, weight: Weight, perturbation: float, seed: int | None) -> frozenset[Key]:
    """The published pattern: rules, then the optimal CSP."""
    options = SuppressionOptions(method=Method.OPTIMAL, weight=weight, perturbation=perturbation)
    requirements = sensitive(table)
    return (
        suppress(table, requirements, options=options, seed=seed).suppressed if requirements else frozenset()
    )


def candidates(table: Table, withheld: frozenset[Key]) -> list[dict[Key, float]]:
    """Every non-negative integer completion of the withheld cells (seed 004 §3.2: a
    fixed solution plus integer combinations of the null space, by enumeration of the
    free variables within their feasibility intervals)."""
    cells = sorted(withheld, key=table.index)
    index = [table.index(k) for k in cells]
    matrix = table.matrix.toarray()
    hidden = np.zeros(len(table), dtype=bool)
    hidden[index] = True
    rows = matrix[:, hidden].any(axis=1)
    a = matrix[np.ix_(rows, index)]
    b = -(matrix[np.ix_(rows, ~hidden)] @ np.array(table.values)[~hidden])
    rank = np.linalg.matrix_rank(a)
    pivots = sorted(qr(a, pivoting=True)[2][:rank])
    free = [j for j in range(len(cells)) if j not in pivots]
    intervals = audit(table, withheld)
    ranges = []
    for j in free:
        low, high = intervals[cells[j]]
        assert np.isfinite(high), "the attack enumerates bounded intervals only"
        ranges.append(range(int(np.ceil(low - 1e-9)), int(np.floor(high + 1e-9)) + 1))
    out = []
    for values in itertools.product(*ranges):
        x = np.zeros(len(cells))
        x[free] = values
        rest = b - a[:, free] @ np.array(values, dtype=float)
        x[pivots] = np.linalg.lstsq(a[:, pivots], rest, rcond=None)[0]
        if np.abs(a @ x - b).max() > 1e-6 or np.abs(x - np.round(x)).max() > 1e-6 or (x < -1e-9).any():
            continue
        out.append(dict(zip(cells, np.round(x), strict=True)))
    return out


def complete(table: Table, candidate: Mapping[Key, float]) -> Table:
    values = dict(zip(table.keys, table.values, strict=True))
    values.update(candidate)
    return Table.from_cells(values)


def effective_intervals(table: Table, pattern: frozenset[Key], matches: Callable[[Table], bool]) -> Intervals:
    """Range of each withheld cell over the candidates the attacker cannot rule out."""
    out: Intervals = {}
    for candidate in candidates(table, pattern):
        if matches(complete(table, candidate)):
            for key, value in candidate.items():
                low, high = out.get(key, (value, value))
                out[key] = (min(low, value), max(high, value))
    return out


def replays(pattern: frozenset[Key], weight: Weight) -> Callable[[Table], bool]:
    """Algorithm 1's matching test against the deterministic variant."""
    return lambda candidate: release(candidate, weight, 0.0, None) == pattern


def could_be_drawn(candidate: Table, pattern: frozenset[Key], weight: Weight) -> bool:
    """Whether some perturbation of the costs makes the guard publish ``pattern`` for
    ``candidate`` (with non-negligible probability).

    The guard draws ``c_i = w_i (1 + rho u_i)``, ``u_i ~ U[0, 1)``. The perturbation most
    favourable to ``pattern`` makes its own cells cheapest and all others dearest; if
    ``pattern`` is optimal just inside that corner (``u = delta`` on it, ``1 - delta``
    elsewhere), it is optimal on a neighbourhood of positive probability.
    """
    requirements = sensitive(candidate)
    if not requirements or not set(requirements) <= pattern:
        return False
    if failures(candidate, pattern, requirements):  # the guard never publishes an unsafe pattern
        return False
    delta = 0.01
    w = base_weights(candidate, weight)
    inside = np.array([key in pattern for key in candidate.keys])
    costs = np.where(inside, w * (1 + PERTURBATION * delta), w * (1 + PERTURBATION * (1 - delta)))
    best = solve_optimal(candidate, required_levels(candidate, requirements), costs)
    assert best is not None and best.proven
    return bool(costs[inside].sum() <= costs[list(best.suppressed)].sum() * (1 + 1e-9))


def shortfalls(table: Table, effective: Intervals) -> list[Key]:
    """Sensitive cells whose effective interval misses a protection level."""
    levels = required_levels(table, sensitive(table))
    out = []
    for i, (upper, lower) in levels.items():
        key, a = table.keys[i], table.values[i]
        low, high = effective.get(key, (a, a))
        if low > a - lower + 1e-9 or high < a + upper - 1e-9:
            out.append(key)
    return out


@pytest.mark.parametrize("weight", list(Weight))
def test_deterministic_suppression_is_broken_by_matching(grid_table: GridTable, weight: Weight) -> None:
    broken = []
    for grid in GRIDS:
        table = grid_table(grid)
        pattern = release(table, weight, perturbation=0.0, seed=None)
        # the release is safe by the usual definition (seed 004, Definition 3) ...
        assert failures(table, pattern, sensitive(table)) == []
        # ... and the attacker's replay reproduces it on the true table
        assert release(table, weight, perturbation=0.0, seed=None) == pattern
        effective = effective_intervals(table, pattern, replays(pattern, weight))
        for key in pattern:
            low, high = effective[key]
            assert low <= table.value(key) <= high
        broken += shortfalls(table, effective)
    assert broken, "the matching attack should narrow some sensitive cell below its level"


def test_first_grid_is_pinned_exactly(grid_table: GridTable) -> None:
    """Both sensitive cells of the first grid (4 and 3) are recovered exactly: every
    other candidate makes the deterministic solver pick a different rectangle."""
    table = grid_table(GRIDS[0])
    pattern = release(table, Weight.COUNT, perturbation=0.0, seed=None)
    effective = effective_intervals(table, pattern, replays(pattern, Weight.COUNT))
    assert sorted(shortfalls(table, effective)) == [(0, 1), (1, 1)]
    assert effective[(0, 1)] == (4, 4)
    assert effective[(1, 1)] == (3, 3)


@pytest.mark.parametrize("weight", list(Weight))
@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("seed", [0, 1])
def test_randomised_suppression_resists_matching(
    grid_table: GridTable, weight: Weight, grid: list[list[int]], seed: int
) -> None:
    table = grid_table(grid)
    pattern = release(table, weight, PERTURBATION, seed)
    assert could_be_drawn(table, pattern, weight)  # the truth is never ruled out
    effective = effective_intervals(
        table, pattern, lambda candidate: could_be_drawn(candidate, pattern, weight)
    )
    assert shortfalls(table, effective) == []
