"""The group search settled by disjoint information sets (``covering.py``) against
enumeration of the whole coset over small primes: a vector below the units needed
exactly when one exists, in the coset; None only where the sets do not exist."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from pyroaring import BitMap

from guard.history import smallgroup
from guard.history.covering import Search, covered
from guard.history.elimination import reduced_echelon
from guard.history.unitmatrix import UnitMatrix


def _instance(seed: int) -> tuple[np.ndarray, np.ndarray, UnitMatrix, list[int], int, int]:
    """x and a rank-d row basis over n coordinates, disjoint units (1-3 a coordinate),
    the units needed, the prime."""
    rng = np.random.default_rng(6600 + seed)
    p = (3, 5, 7)[seed % 3]
    d, n = int(rng.integers(1, 4)), int(rng.integers(5, 17))
    density = rng.uniform(0.3, 0.9)
    rows = np.where(rng.random((d, n)) < density, rng.integers(1, p, (d, n)), 0).astype(np.int64)
    rows, _ = reduced_echelon(rows, p)
    x = np.where(rng.random(n) < density, rng.integers(1, p, n), 0).astype(np.int64)
    sizes = rng.integers(1, 4, n) if seed % 4 else np.ones(n, dtype=np.int64)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    units = UnitMatrix.of([BitMap(range(int(bounds[j]), int(bounds[j + 1]))) for j in range(n)])
    return x, rows, units, sizes.tolist(), int(rng.integers(1, 6)), p


def _search(p: int) -> Search:
    return lambda star, rest, units, need: smallgroup.smallest_group(star, rest, units, need, p, [100_000])


def _fewest_units(x: np.ndarray, rows: np.ndarray, sizes: list[int], p: int) -> int:
    best = 1 << 30
    for coefficients in itertools.product(range(p), repeat=rows.shape[0]):
        v = (x + np.array(coefficients, dtype=np.int64) @ rows) % p
        best = min(best, sum(sizes[j] for j in np.flatnonzero(v).tolist()))
    return best


def _in_coset(v: np.ndarray, x: np.ndarray, rows: np.ndarray, p: int) -> bool:
    return any(
        ((x + np.array(c, dtype=np.int64) @ rows - v) % p == 0).all()
        for c in itertools.product(range(p), repeat=rows.shape[0])
    )


def test_covering_decides_as_enumerating_the_coset() -> None:
    decided = found = searched = 0
    for seed in range(300):
        x, rows, units, sizes, need, p = _instance(seed)
        inner = _search(p)

        def counted(*args: object, inner: Search = inner) -> object:
            nonlocal searched
            searched += 1
            return inner(*args)  # type: ignore[arg-type]

        answer = covered(x, rows, units, need, p, counted)  # type: ignore[arg-type]
        if answer is None:
            continue
        decided += 1
        fewest = _fewest_units(x, rows, sizes, p)
        if fewest >= need:
            assert answer is False, seed
            continue
        assert isinstance(answer, np.ndarray), seed
        assert sum(sizes[j] for j in np.flatnonzero(answer).tolist()) < need, seed
        assert _in_coset(answer, x, rows, p), seed
        found += 1
    # both verdicts are reached on these instances, most are decided, and some through
    # the smaller coset of a last group of less than full rank
    assert found > 10 and decided - found > 20 and decided > 150 and searched > 5


def test_shared_units_or_too_few_columns_are_left_to_the_search() -> None:
    p = 5
    rows = np.array([[1, 0, 2, 3], [0, 1, 1, 1]], dtype=np.int64)
    x = np.array([0, 0, 1, 1], dtype=np.int64)
    shared = UnitMatrix.of([BitMap([0]), BitMap([0, 1]), BitMap([2]), BitMap([3])])
    assert covered(x, rows, shared, 2, p, _search(p)) is None  # a unit in two coordinates
    alone = UnitMatrix.of([BitMap([j]) for j in range(4)])
    assert covered(x, rows, alone, 4, p, _search(p)) is None  # 3 full sets of 2 columns, and a last one
    assert covered(x, rows, alone, 2, p, _search(p)) is not None  # 2 sets of 2 columns: decided


@pytest.mark.parametrize("seed", range(60))
def test_the_search_with_covering_agrees_with_the_search_without(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``smallest_group`` with the covering step and without it: the same verdict (a
    found vector may differ, each below k)."""
    x, rows, units, _, need, p = _instance(seed)
    k = need + 1
    monkeypatch.setattr(smallgroup, "FIRST_NODES", 0)  # the covering step before any branching
    with_covering = smallgroup.smallest_group(x, rows, units, k, p, [100_000])
    monkeypatch.setattr(smallgroup, "covered", lambda *args: None)
    without = smallgroup.smallest_group(x, rows, units, k, p, [100_000])
    assert (with_covering is False) == (without is False)
    assert with_covering is not None and without is not None


def test_the_trial_before_the_covering_step_is_charged_and_sound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A search that stops after ``FIRST_NODES``, tries the covering step and starts
    again spends no more nodes than its budget (the trial is charged, so a cell's and an
    answer's budgets bound the work), never misjudges, and with the trial's nodes added
    to the budget it settles what one search settled (shared units, where the covering
    step is skipped, included)."""
    from tests.history.test_smallgroup import _instance as shared_instance

    restarted = 0
    for seed in range(120):
        p = (3, 5, 7)[seed % 3]
        star, rest, unit_sets, k = shared_instance(seed, p)
        units = UnitMatrix.of(unit_sets)
        monkeypatch.setattr(smallgroup, "FIRST_NODES", 10**9)
        left = [10**6]
        alone = smallgroup.smallest_group(star, rest, units, k, p, left)
        needed = 10**6 - left[0]
        monkeypatch.setattr(smallgroup, "FIRST_NODES", 1)
        tight = [needed]
        again = smallgroup.smallest_group(star, rest, units, k, p, tight)
        assert tight[0] >= -1, seed  # at most its budget (a spent search ends at -1)
        assert again is None or (again is False) == (alone is False), seed
        roomy = smallgroup.smallest_group(star, rest, units, k, p, [needed + 3])
        assert roomy is not None and (roomy is False) == (alone is False), seed
        restarted += needed > 2
    assert restarted > 20
