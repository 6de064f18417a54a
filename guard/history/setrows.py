"""The rows of the small released sets, kept flat: which atoms many of them hold, in one pass.

The exact rows of a group check (``exposure.py``) combine every stored set with a
nonzero coefficient, and each set was read by intersecting its bitmap with every atom's
representative row, one set at a time in Python: ~370 sets a check and 1.6 million
intersections in the first answer of an 8,000-cell GROUP BY at 1M rows. A released set
is a union of atoms, and stays one (later cuts only split atoms), so the atoms it holds
are those of its rows. For the sets of at most N/64 rows (a GROUP BY's cells) the rows
are kept here, and the atoms of many sets are read together: gather their rows, look up
each row's atom, keep each atom's representative row. Larger sets are still read from their bitmaps.

Memory: 4 bytes a row of a kept set, so at most N/16 bytes a set (a line of the
inverted index costs N/8), or 256 bytes on tables of fewer than 4,096 rows.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from scipy.sparse import csr_matrix

from guard.arrays import runs
from guard.history.capacity import grown
from guard.history.rowsets import RowIds
from guard.history.steps import Ids

__all__ = ["KEEP_UP_TO", "SmallSetRows", "small_limit"]

#: a set of at most N / _SHARE rows is small: its rows are kept here, and the inverted
#: index keeps it as (row, set) pairs (8 bytes a row: at most N/8 bytes, a line of bits)
_SHARE = 64
#: and any set of at most this many rows (256 bytes here), whatever N
KEEP_UP_TO = 64


def small_limit(universe: int) -> int:
    """The most rows a small set of a table of ``universe`` rows holds."""
    return max(universe // _SHARE, KEEP_UP_TO)


class SmallSetRows:
    """The rows of each released set of at most N/64 rows (N = ``universe``), by set index."""

    def __init__(self, universe: int) -> None:
        self._limit = small_limit(universe)
        self._flat = np.zeros(1024, dtype=np.uint32)
        self._filled = 0
        #: per set index: where its rows start in ``_flat`` (-1: not kept), and how many
        self._start = np.full(16, -1, dtype=np.int64)
        self._size = np.zeros(16, dtype=np.int64)
        self._sets = 0

    def append(self, rows: RowIds) -> None:
        """The next released set's rows (sorted, distinct): kept when it is small."""
        index = self._sets
        self._start = grown(self._start, index + 1, -1)
        self._size = grown(self._size, index + 1)
        self._sets += 1
        if rows.size > self._limit:
            return
        self._flat = grown(self._flat, self._filled + rows.size)
        self._flat[self._filled : self._filled + rows.size] = rows
        self._start[index], self._size[index] = self._filled, rows.size
        self._filled += int(rows.size)

    def kept(self, sets: Ids) -> npt.NDArray[np.bool_]:
        """Which of ``sets`` (set indices) have their rows here."""
        return self._start[sets] >= 0

    def incidence(
        self,
        sets: Ids,
        atom_of: Callable[[RowIds], Ids],
        representative_of: Callable[[Ids], RowIds],
        atoms: int,
    ) -> csr_matrix:
        """0/1 (len(sets) x ``atoms``): the atoms each of ``sets`` (all kept) holds, given
        ``atom_of`` (rows -> their atoms) and ``representative_of`` (atoms -> one row of
        each) of the partition the sets are unions of. Each set's atoms come in the order
        of their representatives among its rows.

        A set holds an atom iff it holds all of the atom's rows, so each atom it holds is
        taken once, at its representative row: no sort of the (set, atom) pairs to drop
        repeats (that sort was half of a combination's cost at 1M rows)."""
        starts, sizes = self._start[sets], self._size[sets]
        rows = self._flat[runs(starts, sizes)].astype(np.int64)  # every set's rows, set after set
        atom = atom_of(rows)
        first = np.flatnonzero(representative_of(atom) == rows)
        owner = np.repeat(np.arange(sets.size, dtype=np.int64), sizes)[first]
        indptr = np.zeros(sets.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(owner, minlength=sets.size), out=indptr[1:])
        data = np.ones(first.size, dtype=np.int64)
        return csr_matrix((data, atom[first], indptr), shape=(sets.size, atoms))

    def nbytes(self) -> int:
        return int(self._flat.nbytes + self._start.nbytes + self._size.nbytes)
