"""The units of a group search's coordinates as one sparse matrix (``groups.py``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap
from scipy.sparse import csr_matrix

from guard.arrays import distinct

__all__ = ["UnitMatrix"]

Ids = npt.NDArray[np.int64]


@dataclass(frozen=True)
class UnitMatrix:
    """The units of each coordinate of a search, as a sparse 0/1 matrix over unit numbers
    0..count-1: the search's per-node unions and counts become one mat-vec in C instead
    of a bitmap operation per coordinate (most of a deep search's time in Python)."""

    matrix: csr_matrix
    sizes: npt.NDArray[np.int64]
    count: int

    @staticmethod
    def of(unit_sets: list[BitMap]) -> UnitMatrix:
        lengths = np.array([len(u) for u in unit_sets], dtype=np.int64)
        flat = np.concatenate([np.asarray(u, dtype=np.int64) for u in unit_sets] or [np.zeros(0, np.int64)])
        numbers, compact = np.unique(flat, return_inverse=True)
        starts = np.concatenate([[0], np.cumsum(lengths)])
        matrix = csr_matrix(
            (np.ones(flat.size, dtype=np.int64), compact.reshape(-1), starts),
            shape=(len(unit_sets), numbers.size),
        )
        return UnitMatrix(matrix, lengths, int(numbers.size))

    def units_of(self, coordinates: Ids) -> Ids:
        """The units of ``coordinates`` (with repeats), read from the matrix's arrays: a
        row slice builds a new sparse matrix, and a deep search asks this at every node
        (a third of its time went to scipy's indexing)."""
        pointer: Ids = self.matrix.indptr
        indices: Ids = self.matrix.indices
        if coordinates.size == 1:
            row = int(coordinates[0])
            return indices[pointer[row] : pointer[row + 1]]
        starts = pointer[coordinates]
        counts = pointer[coordinates + 1] - starts
        ends = np.cumsum(counts)
        offsets = np.arange(int(ends[-1]) if ends.size else 0) - np.repeat(ends - counts, counts)
        found: Ids = indices[np.repeat(starts, counts) + offsets]
        return found

    def with_units(self, counted: npt.NDArray[np.bool_], coordinates: Ids) -> npt.NDArray[np.bool_]:
        """``counted`` with every unit of ``coordinates`` added (a copy)."""
        out = counted.copy()
        if coordinates.size:
            out[self.units_of(coordinates)] = True
        return out

    def new_units(self, counted: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        """Per coordinate: how many of its units ``counted`` lacks."""
        return self.sizes - np.asarray(self.matrix @ counted.astype(np.int64), dtype=np.int64)

    def restricted(self, coordinates: Ids) -> UnitMatrix:
        """The rows of ``coordinates`` only, over the same unit numbers."""
        return UnitMatrix(csr_matrix(self.matrix[coordinates]), self.sizes[coordinates], self.count)

    def disjoint(self) -> bool:
        """No unit belongs to two coordinates (one row per unit, or atoms of distinct units)."""
        indices = self.matrix.indices
        return bool(distinct(indices).size == indices.size)
