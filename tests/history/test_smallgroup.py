"""The group search's branch and bound against enumeration of the whole coset.

Over a small prime every v = v* + w (w in the row span) can be listed, so the smallest
number of units any of them touches is known without the search: the search must find a
vector below k exactly when one exists, and what it returns must be in the coset and
below k. Units are shared between coordinates in half the cases, where the parity-check
packing must not add up overlapping units.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from pyroaring import BitMap

from guard.history.smallgroup import smallest_group
from guard.history.unitmatrix import UnitMatrix


def _instance(seed: int, p: int) -> tuple[np.ndarray, np.ndarray, list[BitMap], int]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 11))
    d = int(rng.integers(0, 5))
    density = rng.uniform(0.2, 0.7)
    rest = np.where(rng.random((d, n)) < density, rng.integers(1, p, (d, n)), 0).astype(np.int64)
    star = np.where(rng.random(n) < density, rng.integers(1, p, n), 0).astype(np.int64)
    if not star.any():
        star[int(rng.integers(n))] = 1
    shared = seed % 2 == 1
    units: list[BitMap] = []
    next_unit = 0
    for _ in range(n):
        size = int(rng.integers(1, 4))
        if shared and next_unit:
            members = {int(u) for u in rng.integers(0, next_unit + size, size)}
        else:
            members = set(range(next_unit, next_unit + size))
        next_unit = max(next_unit, max(members) + 1)
        units.append(BitMap(members))
    k = int(rng.integers(2, 8))
    return star, rest, units, k


def _smallest_by_enumeration(star: np.ndarray, rest: np.ndarray, units: list[BitMap], p: int) -> int:
    best = 1 << 30
    for coefficients in itertools.product(range(p), repeat=rest.shape[0]):
        v = (star + np.array(coefficients, dtype=np.int64) @ rest) % p if rest.shape[0] else star % p
        touched = BitMap()
        for j in np.flatnonzero(v).tolist():
            touched |= units[j]
        best = min(best, len(touched))
    return best


def _in_coset(v: np.ndarray, star: np.ndarray, rest: np.ndarray, p: int) -> bool:
    target = (v - star) % p
    for coefficients in itertools.product(range(p), repeat=rest.shape[0]):
        w = np.array(coefficients, dtype=np.int64) @ rest % p if rest.shape[0] else np.zeros_like(star)
        if ((w - target) % p == 0).all():
            return True
    return False


@pytest.mark.parametrize("seed", range(240))
def test_the_search_finds_a_small_group_exactly_when_one_exists(seed: int) -> None:
    p = (3, 5, 7)[seed % 3]
    star, rest, unit_sets, k = _instance(seed, p)
    budget = [10_000]
    found = smallest_group(star, rest, UnitMatrix.of(unit_sets), k, p, budget)
    assert found is not None, "a small instance within its budget"
    smallest = _smallest_by_enumeration(star, rest, unit_sets, p)
    if smallest >= k:
        assert found is False
        return
    assert isinstance(found, np.ndarray)
    touched = BitMap()
    for j in np.flatnonzero(found).tolist():
        touched |= unit_sets[j]
    assert len(touched) < k
    assert _in_coset(found, star, rest, p)


def test_a_spent_budget_is_undecided_not_clear() -> None:
    """Six coordinates of one unit each, V0 free on all of them and v* on all of them:
    the smallest group is 1 unit, but no node may be visited."""
    p = 5
    star = np.ones(6, dtype=np.int64)
    rest = np.eye(6, dtype=np.int64)[:5]
    units = UnitMatrix.of([BitMap([j]) for j in range(6)])
    assert smallest_group(star, rest, units, 3, p, [0]) is None
    found = smallest_group(star, rest, units, 3, p, [1_000])
    assert isinstance(found, np.ndarray) and np.count_nonzero(found) < 3


@pytest.mark.parametrize("seed", range(20))
def test_units_read_from_the_arrays_are_the_rows_units(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sets = [BitMap(rng.choice(40, size=int(rng.integers(0, 6)), replace=False).tolist()) for _ in range(15)]
    units = UnitMatrix.of(sets)
    for _ in range(10):
        rows = rng.choice(15, size=int(rng.integers(1, 6)), replace=False).astype(np.int64)
        got = units.units_of(rows)
        assert sorted(got.tolist()) == sorted(units.matrix[rows].indices.tolist())
