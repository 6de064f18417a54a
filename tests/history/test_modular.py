"""Modular arithmetic: primes, and numpy residues checked against Python integers."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.history import modular
from guard.history.modular import (
    PRIME_BITS,
    SUM_CHUNK,
    add_outer_mod,
    inverse_mod,
    is_probable_prime,
    mul_mod,
    random_prime,
    sum_mod,
)

SMALL_PRIMES = [p for p in range(2, 2000) if all(p % d for d in range(2, int(p**0.5) + 1))]


def test_miller_rabin_on_small_numbers_and_hard_composites() -> None:
    assert [n for n in range(2000) if is_probable_prime(n)] == SMALL_PRIMES
    carmichael = [561, 1105, 1729, 2465, 2821, 6601, 8911, 3215031751, 3825123056546413051]
    assert not any(is_probable_prime(n) for n in carmichael)
    assert is_probable_prime(2**31 - 1) and is_probable_prime(2**61 - 1)
    assert not is_probable_prime((2**31 - 1) * (2**19 - 1))


def test_random_primes_are_primes_of_the_requested_size() -> None:
    rng = random.Random(11)
    primes = {random_prime(random_bytes=rng.randbytes) for _ in range(20)}
    assert len(primes) == 20
    assert all(2 ** (PRIME_BITS - 1) <= p < 2**PRIME_BITS and is_probable_prime(p) for p in primes)
    assert 2**30 <= random_prime(31) < 2**31
    with pytest.raises(ValueError, match=r"outside 3\.\.50"):
        random_prime(61)


PRIME = random_prime(random_bytes=random.Random(5).randbytes)
residues = st.integers(0, PRIME - 1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(residues, residues), min_size=1, max_size=40))
def test_mul_mod_matches_python_integers(pairs: list[tuple[int, int]]) -> None:
    a = np.array([x for x, _ in pairs], dtype=np.int64)
    b = np.array([y for _, y in pairs], dtype=np.int64)
    assert mul_mod(a, b, PRIME).tolist() == [x * y % PRIME for x, y in pairs]


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6).flatmap(lambda n: st.lists(residues, min_size=n * (n + 2), max_size=n * (n + 2))))
def test_add_outer_mod_matches_python_integers(values: list[int]) -> None:
    n = int(((4 + 4 * len(values)) ** 0.5 - 2) / 2)
    m, u, v = values[: n * n], values[n * n : n * n + n], values[n * n + n :]
    matrix = np.array(m, dtype=np.int64).reshape(n, n)
    add_outer_mod(matrix, np.array(u, dtype=np.int64), np.array(v, dtype=np.int64), PRIME)
    assert matrix.tolist() == [[(m[i * n + j] + u[i] * v[j]) % PRIME for j in range(n)] for i in range(n)]


def test_extreme_residues() -> None:
    top = np.array([PRIME - 1, PRIME - 1, 0, 1], dtype=np.int64)
    assert mul_mod(top, top[::-1], PRIME).tolist() == [PRIME - 1, 0, 0, PRIME - 1]
    assert mul_mod(top, top, PRIME).tolist() == [1, 1, 0, 1]


def test_sum_mod_never_overflows() -> None:
    values = np.full((3 * SUM_CHUNK + 5, 2), PRIME - 1, dtype=np.int64)
    assert sum_mod(values, PRIME).tolist() == [(3 * SUM_CHUNK + 5) * (PRIME - 1) % PRIME] * 2
    assert sum_mod(values.T, PRIME, axis=1).tolist() == [(3 * SUM_CHUNK + 5) * (PRIME - 1) % PRIME] * 2
    assert sum_mod(np.zeros((0, 3), dtype=np.int64), PRIME).tolist() == [0, 0, 0]


def test_inverse_mod() -> None:
    assert inverse_mod(3, 7) == 5
    with pytest.raises(ValueError, match="zero has no inverse"):
        inverse_mod(14, 7)


def test_add_outer_mod_in_blocks_on_a_strided_view(monkeypatch: pytest.MonkeyPatch) -> None:
    # the basis updates the r x r corner of a larger buffer, a few rows at a time
    monkeypatch.setattr(modular, "_OUTER_BLOCK", 7)
    rng = np.random.default_rng(5)
    buffer = rng.integers(0, PRIME, size=(24, 30), dtype=np.int64)
    u = rng.integers(0, PRIME, size=20, dtype=np.int64)
    v = rng.integers(0, PRIME, size=23, dtype=np.int64)
    expected = [[(int(buffer[i, j]) + int(u[i]) * int(v[j])) % PRIME for j in range(23)] for i in range(20)]
    untouched = buffer[20:].copy(), buffer[:, 23:].copy()
    add_outer_mod(buffer[:20, :23], u, v, PRIME)
    assert buffer[:20, :23].tolist() == expected
    assert np.array_equal(buffer[20:], untouched[0]) and np.array_equal(buffer[:20, 23:], untouched[1][:20])


def test_add_outer_mod_with_sparse_factors_changes_only_their_block() -> None:
    rng = np.random.default_rng(8)
    matrix = rng.integers(0, PRIME, size=(40, 50), dtype=np.int64)
    u = np.zeros(40, dtype=np.int64)
    v = np.zeros(50, dtype=np.int64)
    u[[3, 17]] = [PRIME - 1, 5]
    v[[0, 49, 20]] = [PRIME - 2, 1, 7]
    expected = [[(int(matrix[i, j]) + int(u[i]) * int(v[j])) % PRIME for j in range(50)] for i in range(40)]
    add_outer_mod(matrix, u, v, PRIME)
    assert matrix.tolist() == expected
