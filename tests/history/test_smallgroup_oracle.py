"""The in-place group search takes the old search's steps (``smallgroup_oracle.py``, which
copied its matrix at every node): the same coordinate branched on at every node, the same
nodes spent and the same answer, on random spans large enough to branch deeply, with
budgets that run out mid-search as well as ample ones."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pyroaring import BitMap

from guard.history import smallgroup
from guard.history.elimination import reduced_echelon
from guard.history.modular import random_prime
from guard.history.unitmatrix import UnitMatrix

from . import smallgroup_oracle


def _instance(seed: int) -> tuple[np.ndarray, np.ndarray, UnitMatrix, int, int]:
    rng = np.random.default_rng(seed)
    p = int((5, 7, 1125899906842597)[seed % 3]) if seed % 4 else random_prime(bits=31)
    n = int(rng.integers(8, 40))
    d = int(rng.integers(0, min(n, 20)))
    density = rng.uniform(0.03, 0.4)
    rest = np.where(rng.random((d, n)) < density, rng.integers(1, p, (d, n)), 0).astype(np.int64)
    star = np.where(rng.random(n) < density, rng.integers(1, p, n), 0).astype(np.int64)
    if not star.any():
        star[int(rng.integers(n))] = 1
    units: list[BitMap] = []
    shared = seed % 2 == 1
    for j in range(n):
        size = int(rng.integers(1, 4))
        if shared:
            units.append(BitMap(rng.integers(0, n, size).tolist()))
        else:
            units.append(BitMap(range(3 * j, 3 * j + size)))
    k = int(rng.integers(3, 16))
    return star, rest, UnitMatrix.of(units), k, p


def _run(
    module: Any, monkeypatch: pytest.MonkeyPatch, args: tuple[Any, ...], budget: int
) -> tuple[Any, int, list[int]]:
    picks: list[int] = []
    real = module._Search._pick

    def pick(*a: Any) -> int:
        chosen = int(real(*a))
        picks.append(chosen)
        return chosen

    monkeypatch.setattr(module._Search, "_pick", staticmethod(pick))
    left = [budget]
    found = module.smallest_group(*args, left)
    return found, budget - left[0], picks


@pytest.mark.parametrize("seed", range(200))
def test_the_in_place_search_takes_the_old_searchs_steps(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    star, rest, units, k, p = _instance(seed)
    budget = (400, 37, 5)[seed % 5] if seed % 5 < 3 else 400
    # the branch and bound itself: the covering step before it (``covering.py``) has
    # its own oracle test (``test_covering.py``)
    monkeypatch.setattr(smallgroup, "covered", lambda *args: None)
    args = (star, rest, units, k, p)
    old, old_nodes, old_picks = _run(smallgroup_oracle, monkeypatch, args, budget)
    new, new_nodes, new_picks = _run(smallgroup, monkeypatch, args, budget)
    assert new_picks == old_picks
    assert new_nodes == old_nodes
    if isinstance(old, np.ndarray):
        assert isinstance(new, np.ndarray) and np.array_equal(new, old)
    else:
        assert new is old


@pytest.mark.parametrize("seed", range(40))
def test_the_reduced_echelon_form_is_the_old_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = int((7, 1125899906842597)[seed % 2])
    d, n = int(rng.integers(1, 25)), int(rng.integers(1, 60))
    matrix = np.where(rng.random((d, n)) < rng.uniform(0.05, 0.6), rng.integers(0, p, (d, n)), 0)
    if seed % 3 == 0 and d > 2:
        matrix[-1] = (matrix[0] + 3 * matrix[1]) % p  # rank below the row count
    new, new_pivots = reduced_echelon(matrix.astype(np.int64), p)
    old, old_pivots = smallgroup_oracle.reduced_echelon(matrix.astype(np.int64), p)
    assert np.array_equal(new_pivots, old_pivots)
    assert np.array_equal(new, old)
