"""The group search's sparse combination equals the dense one, entry for entry."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse import csr_matrix

from guard.history import elimination
from guard.history.elimination import combine, combine_sparse, compacted, linked_to

_P = 1125899906842597  # the largest prime below 2**50: residues use every bit


@pytest.mark.parametrize("seed", range(6))
def test_sparse_combination_equals_the_dense_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    d, m, n = (int(x) for x in rng.integers(1, 40, size=3))
    coefficients = rng.integers(0, _P, size=(d, m), dtype=np.int64)
    coefficients[:, rng.random(m) < 0.3] = _P - 1  # the largest residue, often
    dense = rng.integers(0, _P, size=(m, n), dtype=np.int64)
    dense[rng.random((m, n)) < 0.7] = 0
    sparse = combine_sparse(coefficients, csr_matrix(dense), _P)
    assert np.array_equal(sparse, combine(coefficients, dense, _P))


def test_chunks_of_rows_add_up(monkeypatch: pytest.MonkeyPatch) -> None:
    # sums over more rows than one int64 product may hold are taken chunk by chunk
    monkeypatch.setattr(elimination, "_CHUNK", 3)
    rng = np.random.default_rng(9)
    coefficients = rng.integers(0, _P, size=(4, 11), dtype=np.int64)
    dense = rng.integers(0, _P, size=(11, 7), dtype=np.int64)
    sparse = combine_sparse(coefficients, csr_matrix(dense), _P)
    assert np.array_equal(sparse, combine(coefficients, dense, _P))


def test_no_rows_combine_to_zero() -> None:
    out = combine_sparse(np.zeros((2, 0), dtype=np.int64), csr_matrix((0, 5), dtype=np.int64), _P)
    assert out.shape == (2, 5) and not out.any()


@pytest.mark.parametrize("seed", range(5))
def test_compacted_keeps_the_touched_columns_in_order(seed: int) -> None:
    """``compacted`` is ``rows[:, np.unique(rows.indices)]`` (the group search reads the
    same matrix), entries in any order within a row."""
    rng = np.random.default_rng(seed)
    dense = rng.integers(0, 5, size=(7, 60)) * (rng.random((7, 60)) < 0.1)
    dense[:, rng.choice(60, 20, replace=False)] = 0  # columns no row touches
    rows = csr_matrix(dense)
    touched, out = compacted(rows)
    expected = np.unique(rows.indices)
    assert np.array_equal(touched, expected)
    assert np.array_equal(out.toarray(), dense[:, expected])
    assert np.array_equal(touched, np.flatnonzero(dense.any(axis=0)))


@pytest.mark.parametrize("seed", range(8))
def test_linked_rows_are_those_a_search_from_the_seeds_reaches(seed: int) -> None:
    """``linked_to`` against a plain breadth-first search over rows and columns."""
    rng = np.random.default_rng(4400 + seed)
    m, n = int(rng.integers(1, 60)), int(rng.integers(1, 80))
    dense = (rng.random((m, n)) < rng.uniform(0.005, 0.08)) * rng.integers(1, 97, size=(m, n))
    seeds = rng.random(m) < 0.1
    reached, queue = set(np.flatnonzero(seeds).tolist()), list(np.flatnonzero(seeds).tolist())
    while queue:
        row = queue.pop()
        for column in np.flatnonzero(dense[row]).tolist():
            for other in np.flatnonzero(dense[:, column]).tolist():
                if other not in reached:
                    reached.add(other)
                    queue.append(other)
    linked = linked_to(csr_matrix(dense), seeds)
    assert sorted(np.flatnonzero(linked).tolist()) == sorted(reached)
