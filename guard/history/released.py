"""The query sets of the independent released queries, in the order of M's rows.

The compact span audit keeps no r x atoms matrix, so when it needs an atom's column
(which released queries contain it) it reads it here, from one representative row.
Bitmaps keep this history small and make membership and intersection fast.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap
from scipy.sparse import csr_matrix

from guard.history.modular import SUM_CHUNK
from guard.history.rowsets import RowIds, as_bitmap, as_row_ids

__all__ = ["Probe", "ReleasedSets"]


@dataclass(frozen=True, eq=False)
class Probe:
    """Rows to look up in the stored sets, prepared once: ``rows`` sorted, ``order`` the
    caller's position of each (rows = given[order]), their bitmap, and ``slot[row]`` its
    place in ``rows``. Built once per partition, it serves every read until the next cut."""

    rows: RowIds
    order: npt.NDArray[np.int64]
    bitmap: BitMap
    slot: npt.NDArray[np.int64]

    @classmethod
    def of(cls, given: RowIds) -> Probe:
        order = np.argsort(given, kind="stable").astype(np.int64)
        rows = np.asarray(given, dtype=np.int64)[order]
        slot = np.zeros(int(rows[-1]) + 1 if rows.size else 0, dtype=np.int64)
        slot[rows] = np.arange(rows.size)
        return cls(rows, order, as_bitmap(rows), slot)


class ReleasedSets:
    """Released query sets (row i of M) with the caller's tag for each."""

    def __init__(self) -> None:
        self._sets: list[BitMap] = []
        self._tags: list[Hashable] = []

    def __len__(self) -> int:
        return len(self._sets)

    def append(self, rows: RowIds, tag: Hashable) -> None:
        self._sets.append(as_bitmap(rows))
        self._tags.append(tag)

    def column(self, row: int) -> npt.NDArray[np.bool_]:
        """Which released sets contain ``row``: the column of its atom in M."""
        return np.fromiter((row in s for s in self._sets), dtype=bool, count=len(self._sets))

    def weighted_membership(
        self, probe: Probe, weights: npt.NDArray[np.int64], support: RowIds, p: int
    ) -> npt.NDArray[np.int64]:
        """For each of the probe's rows (in the probe's sorted order): the sum mod p of
        ``weights[i]`` over the sets i in ``support`` that contain it (one bitmap
        intersection per set)."""
        total = np.zeros(probe.rows.size, dtype=np.int64)
        for count, i in enumerate(support, start=1):
            total[probe.slot[as_row_ids(self._sets[i] & probe.bitmap)]] += weights[i]
            if count % SUM_CHUNK == 0:  # residues < 2**50: reduce before int64 could overflow
                total %= p
        return total % p

    def membership(self, sets: npt.NDArray[np.int64], probe: Probe) -> csr_matrix:
        """0/1 sparse matrix (len(sets) x probed rows, in the caller's order of the rows):
        which of the probe's rows each set holds."""
        indptr, indices = [0], []
        for i in sets.tolist():
            hits = probe.slot[as_row_ids(self._sets[i] & probe.bitmap)]
            indices.append(probe.order[hits])
            indptr.append(indptr[-1] + hits.size)
        columns = np.concatenate(indices) if indices else np.zeros(0, dtype=np.int64)
        data = np.ones(columns.size, dtype=np.int64)
        return csr_matrix((data, columns, np.asarray(indptr)), shape=(len(sets), probe.rows.size))

    def tags(self, coefficients: npt.NDArray[np.int64]) -> tuple[Hashable, ...]:
        """Tags of the sets with a nonzero coefficient."""
        return tuple(self._tags[i] for i in np.flatnonzero(coefficients))

    def nbytes(self) -> int:
        """Memory of the stored bitmaps' containers."""
        total = 0
        for stored in self._sets:
            stats = stored.get_statistics()
            total += stats["n_bytes_array_containers"]
            total += stats["n_bytes_run_containers"] + stats["n_bytes_bitset_containers"]
        return total
