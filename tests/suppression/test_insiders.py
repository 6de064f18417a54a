"""Proofs against insiders by smallest deviations (guard.suppression.smallest and
guard.suppression.insiders): the LP's deviation is a least-total-move deviation by an
LP written here; a requirement is proven against each single contributor when every
one of them is avoided by some deviation, even where no one deviation avoids them
all; and every proof holds against an independent interval LP with the insider's own
cell published."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import linprog

import guard.suppression.standing as standing_module
from guard.suppression import TOTAL, Key, Protection, Table
from guard.suppression.insiders import same_unit
from guard.suppression.smallest import SmallestDeviation
from guard.suppression.standing import prove_standing


def _grid(values: np.ndarray) -> Table:
    rows, cols = values.shape
    cells: dict[Key, float] = {}
    for r, c in itertools.product(range(rows), range(cols)):
        cells[(r, c)] = float(values[r, c])
    for r in range(rows):
        cells[(r, TOTAL)] = float(values[r].sum())
    for c in range(cols):
        cells[(TOTAL, c)] = float(values[:, c].sum())
    cells[(TOTAL, TOTAL)] = float(values.sum())
    return Table.from_cells(cells)


def _least_move(table: Table, movable: set[int], p: int, move: float) -> float | None:
    """The least total move of a deviation moving ``p`` by ``move``, by scipy's LP on
    the split form ``d = u - v`` (None: no deviation)."""
    a, lb, ub = table.arrays
    n = len(table)
    dense = table.matrix.toarray()
    matrix = np.hstack([dense, -dense])
    bounds = []
    for part in ("u", "v"):
        for i in range(n):
            room = (ub[i] - a[i]) if part == "u" else (a[i] - lb[i])
            bounds.append((0.0, room if i in movable else 0.0))
    if max(move, 0.0) > bounds[p][1] or max(-move, 0.0) > bounds[n + p][1]:
        return None  # beyond the cell's own bounds
    bounds[p] = (max(move, 0.0), max(move, 0.0))
    bounds[n + p] = (max(-move, 0.0), max(-move, 0.0))
    result = linprog(np.ones(2 * n), A_eq=matrix, b_eq=np.zeros(len(dense)), bounds=bounds, method="highs")
    return float(result.fun) if result.status == 0 else None


@pytest.mark.parametrize("seed", range(12))
def test_the_smallest_deviation_is_valid_and_of_least_total_move(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = tuple(int(x) for x in rng.integers(3, 6, size=2))
    table = _grid(rng.integers(0, 40, size=shape).astype(float))
    n = len(table)
    movable = {i for i in range(n) if rng.random() < 0.7}
    lp = SmallestDeviation(table, movable)
    a, lb, ub = table.arrays
    for _ in range(8):
        p = int(rng.choice(sorted(movable)))
        avoid = {int(i) for i in rng.choice(n, size=2, replace=False)} - {p}
        move = float(rng.choice([-1.0, 1.0]) * rng.integers(1, 10))
        found = lp.solve(p, move, avoid)
        expected = _least_move(table, movable - avoid, p, move)
        if expected is None:
            assert found is None
            continue
        assert found is not None
        assert found[p] == pytest.approx(move)
        assert np.abs(table.matrix @ found).max() < 1e-6
        assert np.all(found >= lb - a - 1e-6) and np.all(found <= ub - a + 1e-6)
        fixed = [i for i in range(n) if i not in movable or i in avoid]
        assert np.abs(found[fixed]).max(initial=0.0) < 1e-9
        assert np.abs(found).sum() == pytest.approx(expected, rel=1e-6)


def _interval(table: Table, known: set[int], p: int) -> tuple[float, float]:
    """p's interval with the cells ``known`` at their values and the rest free in their
    bounds, by scipy's LP."""
    a, lb, ub = table.arrays
    n = len(table)
    bounds = [(a[i], a[i]) if i in known else (lb[i], None if np.isinf(ub[i]) else ub[i]) for i in range(n)]
    cost = np.zeros(n)
    cost[p] = 1.0
    dense = table.matrix.toarray()
    rhs = np.zeros(len(dense))
    low = linprog(cost, A_eq=dense, b_eq=rhs, bounds=bounds, method="highs")
    high = linprog(-cost, A_eq=dense, b_eq=rhs, bounds=bounds, method="highs")
    return float(low.fun), (np.inf if high.status == 3 else float(-high.fun))


def test_a_row_of_single_contributors_is_proven_against_each_of_them() -> None:
    """Row 0 is five people, one each (a rare occupation crossed with regions): cell
    (0, 0) can only move against another cell of its row, each of which its contributor
    knows, so no deviation avoids all of them at once; yet against each one alone some
    deviation moves (0, 0) by its levels. The proof is checked against every insider by
    an interval LP with her cell published."""
    rng = np.random.default_rng(3)
    values = rng.integers(50, 90, size=(5, 5)).astype(float)
    values[0] = [12.0, 9.0, 14.0, 11.0, 10.0]
    table = _grid(values)
    inner = {(r, c) for r in range(5) for c in range(5)}
    singles = [(0, c) for c in range(5)]
    requirement = {(0, 0): Protection(4.0, 4.0)}
    standing = prove_standing(table, requirement, inner, singles)
    assert standing.proven == {(0, 0)}
    published = {table.index(k) for k in table.keys if k not in inner}
    p = table.index((0, 0))
    for insider in [None, *singles[1:]]:
        known = published | ({table.index(insider)} if insider else set())
        low, high = _interval(table, known, p)
        assert high >= values[0, 0] + 4.0 - 1e-6, insider
        assert low <= values[0, 0] - 4.0 + 1e-6, insider
    # the same row with one column published: the insiders still are, one by one
    assert (0, 0) in prove_standing(table, requirement, inner - {(3, 3)}, singles).proven


def test_what_the_budget_does_not_reach_is_not_standing(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(4)
    values = rng.integers(50, 90, size=(5, 5)).astype(float)
    table = _grid(values)
    inner = {(r, c) for r in range(5) for c in range(5)}
    requirements = {(r, r): Protection(4.0, 4.0) for r in range(5)}
    assert prove_standing(table, requirements, inner).proven == set(requirements)
    monkeypatch.setattr(standing_module, "MAX_PIVOT_WORK", 0)
    monkeypatch.setattr(standing_module, "MAX_WORK", 0)
    monkeypatch.setattr(standing_module, "MIN_SOLVES", 0)
    assert prove_standing(table, requirements, inner).proven == frozenset()


def test_an_earlier_answers_proofs_prove_again_only_where_they_still_hold() -> None:
    rng = np.random.default_rng(5)
    table = _grid(rng.integers(20, 90, size=(6, 6)).astype(float))
    inner = {(r, c) for r in range(6) for c in range(6)}
    requirements = {(r, (2 * r) % 6): Protection(5.0, 5.0) for r in range(6)}
    first = prove_standing(table, requirements, inner)
    assert first.proven == set(requirements) and first.solved > 0
    again = prove_standing(table, requirements, inner, prior=first.proofs(table))
    assert again.proven == first.proven and again.solved == 0
    # a cell one of those proofs moved is published now: no proof kept may move it
    moved = {key for proof in first.proofs(table) for key in proof} & inner - set(requirements)
    published = sorted(moved)[0]
    later = prove_standing(table, requirements, inner - {published}, prior=first.proofs(table))
    assert all(published not in proof for proof in later.proofs(table))
    assert later.solved > 0


@pytest.mark.parametrize("seed", range(8))
def test_insiders_sharing_one_contributor_are_joined_as_a_walk_over_totals_finds(seed: int) -> None:
    """A singleton total and a singleton member share their one contributor, and so do
    the ends of a chain of such pairs: the classes against a walk written here."""
    rng = np.random.default_rng(seed)
    table = _grid(rng.integers(1, 30, size=(4, 5)))
    singletons = {i for i in range(len(table)) if rng.random() < 0.5}
    pairs = [
        (table.index(relation.total), table.index(member))
        for relation in table.relations
        for member in relation.members
    ]
    got = same_unit(table, singletons)
    for start in singletons:
        seen, stack = {start}, [start]
        while stack:
            cell = stack.pop()
            for total, member in pairs:
                if total in singletons and member in singletons and cell in (total, member):
                    other = member if cell == total else total
                    if other not in seen:
                        seen.add(other)
                        stack.append(other)
        assert got[start] == frozenset(seen)
