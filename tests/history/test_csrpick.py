"""The CSR picks against scipy's own fancy indexing (dense comparison, and each row's
entries as a set)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse import random as sparse_random

from guard.history.csrpick import entry_rows, pick_columns, pick_rows


def _matrices() -> list[csr_matrix]:
    rng = np.random.default_rng(7)
    out = []
    for shape, density in (((0, 5), 0.5), ((6, 0), 0.5), ((1, 1), 1.0), ((9, 14), 0.2), ((40, 300), 0.02)):
        m = sparse_random(*shape, density=density, format="csr", random_state=rng, dtype=np.float64)
        m.data = rng.integers(1, 1 << 49, m.data.size)
        m = csr_matrix(m, dtype=np.int64)
        out.append(m)
    # unsorted entries within rows, as a sparse product leaves them
    shuffled = out[-1].copy()
    for i in range(shuffled.shape[0]):
        a, b = shuffled.indptr[i], shuffled.indptr[i + 1]
        order = rng.permutation(b - a) + a
        shuffled.indices[a:b], shuffled.data[a:b] = shuffled.indices[order], shuffled.data[order]
    shuffled.has_sorted_indices = False
    out.append(shuffled)
    return out


def _same(got: csr_matrix, want: csr_matrix) -> None:
    assert got.shape == want.shape
    assert (got.toarray() == want.toarray()).all()
    assert got.nnz == want.nnz  # nothing merged, dropped or added
    for i in range(got.shape[0]):
        lo, hi = got.indptr[i], got.indptr[i + 1]
        mine = sorted(zip(got.indices[lo:hi].tolist(), got.data[lo:hi].tolist(), strict=True))
        lo, hi = want.indptr[i], want.indptr[i + 1]
        theirs = sorted(zip(want.indices[lo:hi].tolist(), want.data[lo:hi].tolist(), strict=True))
        assert mine == theirs


@pytest.mark.parametrize("index", range(6))
def test_picks_equal_scipy_indexing(index: int) -> None:
    matrix = _matrices()[index]
    rng = np.random.default_rng(index)
    m, n = matrix.shape
    row_choices = [np.arange(m), rng.permutation(m), rng.integers(0, max(m, 1), 7) if m else np.arange(0)]
    for rows in row_choices:
        _same(pick_rows(matrix, rows), csr_matrix(matrix[rows]))
    mask = rng.random(m) < 0.5
    _same(pick_rows(matrix, mask), csr_matrix(matrix[np.flatnonzero(mask)]))
    for columns in (np.arange(n), rng.permutation(n)[: n // 2], np.arange(0)):
        _same(pick_columns(matrix, columns), csr_matrix(matrix[:, columns]))
    mask = rng.random(n) < 0.3
    _same(pick_columns(matrix, mask), csr_matrix(matrix[:, np.flatnonzero(mask)]))
    assert (entry_rows(matrix) == matrix.tocoo().row).all() or matrix.nnz == 0
