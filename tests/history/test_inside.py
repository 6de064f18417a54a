"""``inside.inside_one_set`` (one echelon form for every sensitive set) against two
oracles: enumeration of every combination over a small prime, and the per-set left null
space it replaced (``groups.left_null_space``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from guard.history.elimination import reduced_echelon
from guard.history.groups import left_null_space
from guard.history.inside import inside_one_set
from guard.history.modular import random_prime


def _random_case(seed: int, p: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 9))
    r = int(rng.integers(0, 4))
    dense = rng.random((r + 1, n)) < rng.uniform(0.2, 0.8)
    values = rng.integers(1, p, size=(r + 1, n))
    rows = np.where(dense, values, 0).astype(np.int64)
    sets = rng.integers(-1, 3, size=n).astype(np.int64)
    return rows[0], rows[1:], sets


def _by_enumeration(star: np.ndarray, rest: np.ndarray, sets: np.ndarray, p: int) -> set[int]:
    found = set()
    for coefficients in itertools.product(range(p), repeat=rest.shape[0]):
        vector = (star + np.asarray(coefficients, dtype=np.int64) @ rest) % p if rest.shape[0] else star % p
        for number in np.unique(sets[sets >= 0]).tolist():
            if not vector[sets != number].any():
                found.add(int(number))
    return found


def _by_null_space(star: np.ndarray, rest: np.ndarray, sets: np.ndarray, p: int) -> int | None:
    for number in np.unique(sets[sets >= 0]).tolist():
        outside = sets != number
        stacked = np.vstack([star[outside][None, :], rest[:, outside]])
        if (left_null_space(stacked, p)[:, 0] != 0).any():
            return int(number)
    return None


@pytest.mark.parametrize("seed", range(150))
def test_matches_enumeration_over_a_small_prime(seed: int) -> None:
    p = 5
    star, rest, sets = _random_case(seed, p)
    found = inside_one_set(star, rest, sets, p)
    every = _by_enumeration(star, rest, sets, p)
    if every:
        assert found == min(every)
    else:
        assert found is None


@pytest.mark.parametrize("seed", range(150))
def test_matches_the_per_set_null_space_over_a_large_prime(seed: int) -> None:
    p = random_prime(bits=50, random_bytes=np.random.default_rng(seed).bytes)
    rng = np.random.default_rng(10_000 + seed)
    n, r = int(rng.integers(3, 40)), int(rng.integers(0, 12))
    base = rng.integers(0, p, size=(r + 1, n)) * (rng.random((r + 1, n)) < 0.3)
    # make some candidates fall inside a set: star = a combination of rest plus a vector
    # supported on one set's columns
    sets = rng.integers(-1, 5, size=n).astype(np.int64)
    star, rest = base[0].astype(np.int64), base[1:].astype(np.int64)
    if r and rng.random() < 0.6:
        chosen = int(rng.integers(0, 5))
        inside = np.where(sets == chosen, rng.integers(0, p, size=n), 0)
        star = (rng.integers(0, 4, size=r) @ (rest % p) % p + inside) % p  # small: no overflow
        star = star.astype(np.int64)
    assert inside_one_set(star, rest, sets, p) == _by_null_space(star, rest, sets, p)


def test_reduced_echelon_form() -> None:
    p = 7
    rows = np.array([[0, 2, 4, 1], [0, 1, 2, 3], [1, 1, 1, 1]], dtype=np.int64)
    reduced, pivots = reduced_echelon(rows, p)
    assert pivots.tolist() == [0, 1, 3]
    assert (reduced[:, pivots] == np.eye(3, dtype=np.int64)).all()
