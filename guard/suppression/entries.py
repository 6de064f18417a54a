"""Array work on a table's relation matrix that several LPs of the suppression share:
where the entries of some lines are stored, the columns of some cells over the relations
they touch (as scipy slices and stacks them, without its fancy indexing per LP), the
product of some columns, and the parts that withheld cells form through the relations
holding them.

The slices and the product here return the same arrays, entry for entry and in the same
order, as the scipy expression each docstring names: the LPs HiGHS receives, and so
every deviation and every cell withheld, do not depend on which one built them."""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from guard.arrays import distinct

__all__ = [
    "column_product",
    "entries",
    "linked_labels",
    "paired_arrays",
    "positions",
    "submatrix",
    "submatrix_arrays",
]


#: up to how many lines :func:`positions` and :func:`entries` join one range or slice
#: per line rather than computing every position at once
_FEW = 8


def positions(pointer: np.ndarray, lines: np.ndarray) -> np.ndarray:
    """Where each entry of ``lines`` (rows of a CSR, columns of a CSC, whose ``indptr``
    is ``pointer``) is stored in ``indices`` / ``data``: line after line, entries in
    stored order, as ``matrix[lines]`` holds them, without building that matrix."""
    lines = np.asarray(lines)
    if len(lines) <= _FEW:
        # a few lines (a deviation's cells): one range each, cheaper than the arithmetic
        # that places many
        ranges = [np.arange(pointer[line], pointer[line + 1], dtype=np.int64) for line in lines.tolist()]
        return np.concatenate(ranges) if ranges else np.zeros(0, dtype=np.int64)
    starts = pointer[lines]
    counts = pointer[lines + 1] - starts
    ends = np.cumsum(counts)
    # entry t of the result is the (t - e)-th of its line, e the entries before that line:
    # the line's start plus that offset, one shift per line (fewer array passes than
    # offsets and starts repeated apart: this runs several times per deviation LP)
    shift = starts - (ends - counts)
    found: np.ndarray = np.arange(int(ends[-1]) if len(ends) else 0) + np.repeat(shift, counts)
    return found


def entries(matrix: sparse.csr_matrix | sparse.csc_matrix, lines: np.ndarray) -> np.ndarray:
    """The minor indices stored in ``lines`` (rows of a CSR, columns of a CSC): the
    columns each row holds, or the rows each column holds, line after line in stored
    order, repeats kept. ``matrix[lines].indices`` (``matrix[:, lines].indices`` for a
    CSC) without building that matrix."""
    lines = np.asarray(lines)
    if len(lines) <= _FEW:
        # a few lines (a cell's relations, a deviation's cells): their stored slices
        # joined, cheaper than the arithmetic that places many
        pointer, indices = matrix.indptr, matrix.indices
        slices = [indices[pointer[line] : pointer[line + 1]] for line in lines.tolist()]
        return np.concatenate(slices) if slices else indices[:0].copy()
    found: np.ndarray = matrix.indices[positions(matrix.indptr, lines)]
    return found


def submatrix(csc: sparse.csc_matrix, columns: np.ndarray) -> tuple[sparse.csc_matrix, np.ndarray]:
    """``csc[:, columns]`` restricted to the rows it touches, and those rows (sorted): the
    arrays scipy's ``sub = csc[:, columns]; sub[np.unique(sub.indices)]`` builds (every
    entry of each column kept in its stored order, rows renumbered in order)."""
    indptr, renumbered, data, rows = submatrix_arrays(csc, columns)
    return sparse.csc_matrix((data, renumbered, indptr), shape=(len(rows), len(columns))), rows


def submatrix_arrays(
    csc: sparse.csc_matrix, columns: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`submatrix` as its CSC arrays (indptr, indices, data) and its rows, no matrix
    built: the form the kept HiGHS instance takes (``LpSolver.solve``)."""
    pointer = csc.indptr
    counts = pointer[columns + 1] - pointer[columns]
    where = positions(pointer, columns)
    found = csc.indices[where]
    rows = distinct(found)
    indptr = np.zeros(len(columns) + 1, dtype=csc.indptr.dtype)
    np.cumsum(counts, out=indptr[1:])
    renumbered = np.searchsorted(rows, found).astype(csc.indices.dtype)
    return indptr, renumbered, csc.data[where], rows


def paired_arrays(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CSC arrays (indptr, indices, data) of ``[part, -part]`` from those of ``part``:
    ``sparse.hstack([part, -part], format="csc")``'s, the columns of d+ then of d-."""
    nnz = int(indptr[-1])
    return (
        np.concatenate([indptr, indptr[1:] + nnz]),
        np.concatenate([indices, indices]),
        np.concatenate([data, -data]),
    )


def column_product(csc: sparse.csc_matrix, support: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``csc[:, support] @ values`` (a dense vector, one entry per row) without building
    the slice: each product added in scipy's order (column by column, entries as stored;
    ``np.bincount`` adds its weights one after the other, as ``np.add.at`` did, in less
    time), so the result is the same floating-point vector."""
    pointer = csc.indptr
    counts = pointer[support + 1] - pointer[support]
    where = positions(pointer, support)
    residual: np.ndarray = np.bincount(
        csc.indices[where], weights=csc.data[where] * np.repeat(values, counts), minlength=csc.shape[0]
    )
    return residual


def linked_labels(csc: sparse.csc_matrix, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The connected parts (scipy, in C) of the graph joining ``cells`` (columns) to the
    relations (rows) that hold them: a label per cell and a label per relation (a
    relation holding none of ``cells`` is a part of its own)."""
    cells = np.asarray(cells, dtype=np.int64)
    pointer = csc.indptr
    counts = pointer[cells + 1] - pointer[cells]
    relations = csc.indices[positions(pointer, cells)]
    h, m = len(cells), csc.shape[0]
    # nodes: the cells (0..h-1), then every relation (h + its row); one edge a membership
    members = np.repeat(np.arange(h), counts)
    graph = sparse.csr_matrix((np.ones(len(members)), (members, h + relations)), shape=(h + m, h + m))
    _, labels = connected_components(graph, directed=False)
    return labels[:h], labels[h:]
