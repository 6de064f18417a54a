"""Array work on a table's relation matrix that several LPs of the suppression share:
where the entries of some lines are stored, and the parts that withheld cells form
through the relations holding them."""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components

__all__ = ["linked_labels", "positions"]


def positions(pointer: np.ndarray, lines: np.ndarray) -> np.ndarray:
    """Where each entry of ``lines`` (rows of a CSR, columns of a CSC, whose ``indptr``
    is ``pointer``) is stored in ``indices`` / ``data``: line after line, entries in
    stored order, as ``matrix[lines]`` holds them, without building that matrix."""
    lines = np.asarray(lines)
    starts = pointer[lines]
    counts = pointer[lines + 1] - starts
    # each line's start plus the entry's offset within its line
    offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    found: np.ndarray = np.repeat(starts, counts) + offsets
    return found


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
