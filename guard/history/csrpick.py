"""Rows and columns picked out of a CSR matrix with a few numpy operations.

scipy's fancy indexing (``m[rows]``, ``m[:, columns]``) validates its indices and builds
intermediate matrices (its column indexing argsorts the index array): on the history
audit's small matrices (a few hundred rows, an answer's thousands of checks) that
overhead, not the copying, was most of what scipy's indexing cost a GROUP BY's first
answer (py-spy, session 24). These give the same matrix (the same entries, each row's entries
in their stored order) from one gather of the stored arrays.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.sparse import csr_matrix

from guard.arrays import runs

__all__ = ["entry_rows", "pick_columns", "pick_rows"]

Ids = npt.NDArray[np.int64]


def entry_rows(matrix: csr_matrix) -> Ids:
    """The row of each stored entry, in storage order (COO's ``row``)."""
    return np.repeat(np.arange(matrix.shape[0], dtype=np.int64), np.diff(matrix.indptr))


def pick_rows(matrix: csr_matrix, rows: npt.ArrayLike) -> csr_matrix:
    """``matrix[rows]`` (row ids, in the order given, repeats allowed, or a boolean mask)."""
    rows = np.asarray(rows)
    if rows.dtype == np.bool_:
        rows = np.flatnonzero(rows)
    rows = rows.astype(np.int64, copy=False)
    starts = matrix.indptr[rows].astype(np.int64)
    sizes = matrix.indptr[rows + 1].astype(np.int64) - starts
    indptr = np.zeros(rows.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=indptr[1:])
    at = runs(starts, sizes)
    return csr_matrix((matrix.data[at], matrix.indices[at], indptr), shape=(rows.size, matrix.shape[1]))


def pick_columns(matrix: csr_matrix, columns: npt.ArrayLike) -> csr_matrix:
    """``matrix[:, columns]`` for distinct column ids (in the order given) or a boolean
    mask: the entries in those columns, renumbered, each row's in their stored order."""
    columns = np.asarray(columns)
    if columns.dtype == np.bool_:
        columns = np.flatnonzero(columns)
    place = np.full(matrix.shape[1], -1, dtype=np.int64)
    place[columns] = np.arange(columns.size, dtype=np.int64)
    new = place[matrix.indices]
    keep = new >= 0
    indptr = np.zeros(matrix.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(entry_rows(matrix)[keep], minlength=matrix.shape[0]), out=indptr[1:])
    return csr_matrix((matrix.data[keep], new[keep], indptr), shape=(matrix.shape[0], columns.size))
