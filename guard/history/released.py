"""The query sets of the independent released queries, in the order of M's rows.

The compact span audit keeps no r x atoms matrix, so when it needs an atom's column
(which released queries contain it) it reads it here, from one representative row.
Bitmaps keep this history small and make membership and intersection fast.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap
from scipy.sparse import csc_matrix, csr_matrix

from guard.arrays import distinct
from guard.history.boxes import BoxCodes
from guard.history.inverted import InvertedIndex
from guard.history.modular import HALF, LOW, ONE_PRODUCT, SUM_CHUNK, mul_mod
from guard.history.rowsets import RowIds, as_bitmap
from guard.history.setrows import SmallSetRows
from guard.history.steps import Ids

__all__ = ["Probe", "ReleasedSets", "product_mod"]


@dataclass(frozen=True, eq=False)
class Probe:
    """Rows to look up in the stored sets, prepared once: ``rows`` sorted, ``order`` the
    caller's position of each (rows = given[order]), their bitmap, and ``slot[row]`` its
    place in ``rows`` when the rows are dense in their range (None for a few rows over a
    wide range, found by binary search). Built once per partition, it serves every read
    until the next cut."""

    rows: RowIds
    order: npt.NDArray[np.int64]
    bitmap: BitMap
    slot: npt.NDArray[np.int64] | None

    @classmethod
    def of(cls, given: RowIds) -> Probe:
        """The probe of ``given`` (distinct row ids, any order)."""
        given = np.asarray(given, dtype=np.int64)
        top = int(given.max()) + 1 if given.size else 0
        if given.size * 16 < top:
            # few rows over a wide range: a sort, and no slot array over the range (the
            # witness probes a few hundred rows of 1M tens of thousands of times: an
            # 8 MB slot array each time was most of its cost)
            order = np.argsort(given, kind="stable").astype(np.int64)
            rows = given[order]
            return cls(rows, order, as_bitmap(rows), None)
        # a pass over the range instead of a sort (every atom's representative: the
        # probe is rebuilt after each cut, and the range is the finest cells)
        where = np.full(top, -1, dtype=np.int64)
        where[given] = np.arange(given.size, dtype=np.int64)
        rows = np.flatnonzero(where >= 0).astype(np.int64)
        order = where[rows]
        slot = np.zeros(top, dtype=np.int64)
        slot[rows] = np.arange(rows.size)
        return cls(rows, order, as_bitmap(rows), slot)

    def moved(self, before: RowIds, after: RowIds) -> Probe:
        """``Probe.of(after)`` from this probe, which is ``Probe.of(before)``, when
        ``after`` keeps most of ``before``'s rows in place and appends some (an atom's
        representatives after a cut: only the cut atoms' change, the new parts' are
        appended). Costs O(rows + changes), not a pass over the whole range of rows."""
        after = np.asarray(after, dtype=np.int64)
        old = before.size
        changed = np.flatnonzero(after[:old] != before)
        gone = before[changed]
        entering = np.concatenate([changed, np.arange(old, after.size, dtype=np.int64)])
        keep = np.ones(self.rows.size, dtype=bool)
        keep[self.places_of(gone)] = False
        rows, order = self.rows[keep], self.order[keep]
        added = after[entering]
        sort = np.argsort(added, kind="stable")
        added, entering = added[sort], entering[sort]
        at = np.searchsorted(rows, added)
        rows, order = np.insert(rows, at, added), np.insert(order, at, entering)
        bitmap = (self.bitmap - as_bitmap(np.sort(gone))) | as_bitmap(added)
        top = int(rows[-1]) + 1 if rows.size else 0
        if rows.size * 16 < top:
            return Probe(rows, order, bitmap, None)
        size = max(self.slot.size if self.slot is not None else 0, top)
        slot = np.zeros(size, dtype=np.int64)
        slot[rows] = np.arange(rows.size)
        return Probe(rows, order, bitmap, slot)

    @cached_property
    def places(self) -> npt.NDArray[np.int32]:
        """``order`` in 32 bits, a CSR's own index type (taken once per probe: every
        combination's membership reads it)."""
        return self.order.astype(np.int32)

    def places_of(self, rows: npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.int64]:
        """The places in ``rows`` of some of the probed rows."""
        if self.slot is None:
            return np.searchsorted(self.rows, rows).astype(np.int64)
        places: npt.NDArray[np.int64] = self.slot[rows]
        return places

    def hits(self, stored: BitMap) -> npt.NDArray[np.int64]:
        """The places in ``rows`` of the probed rows that ``stored`` holds, ascending."""
        found = np.frombuffer((stored & self.bitmap).to_array(), dtype=np.uint32)
        return self.places_of(found)


class ReleasedSets:
    """Released query sets (row i of M) over rows ``0 .. universe - 1``, with the
    caller's tag for each."""

    def __init__(self, universe: int, boxes: BoxCodes | None = None) -> None:
        self._sets: list[BitMap] = []
        self._tags: list[Hashable] = []
        #: which sets hold each row, for the sets before the last few (``column``); with
        #: ``boxes`` (the rows' dimension values) most sets are indexed as boxes
        self._index = InvertedIndex(universe, boxes)
        #: the rows of the small sets, flat (``combinations``)
        self._rows = SmallSetRows(universe)

    def __len__(self) -> int:
        return len(self._sets)

    def append(self, rows: RowIds, tag: Hashable) -> None:
        self._sets.append(as_bitmap(rows))
        self._tags.append(tag)
        self._index.catch_up(self._sets)
        self._rows.append(np.asarray(rows, dtype=np.int64))

    def equals(self, index: int, rows: BitMap) -> bool:
        """Whether stored set ``index`` holds exactly ``rows``."""
        return bool(self._sets[index] == rows)

    def kept(self, sets: Ids) -> npt.NDArray[np.bool_]:
        """Which of ``sets`` are small: their rows kept flat, read by ``combinations``
        together in one pass rather than one intersection each."""
        return self._rows.kept(sets)

    def column(self, row: int) -> npt.NDArray[np.bool_]:
        """Which released sets contain ``row``: the column of its atom in M."""
        # a test per set in Python was 14 % of a first answer of 8,000 cells at 1M rows
        # (thousands of exchanges, each reading a column over thousands of sets)
        out = np.zeros(len(self._sets), dtype=bool)
        out[self._index.holding(row)] = True
        for i in range(self._index.sets, len(self._sets)):
            out[i] = row in self._sets[i]
        return out

    def weighted_membership(
        self, probe: Probe, weights: npt.NDArray[np.int64], support: RowIds, p: int
    ) -> npt.NDArray[np.int64]:
        """For each of the probe's rows (in the probe's sorted order): the sum mod p of
        ``weights[i]`` over the sets i in ``support`` that contain it (one bitmap
        intersection per set)."""
        total = np.zeros(probe.rows.size, dtype=np.int64)
        for count, i in enumerate(support.tolist(), start=1):
            total[probe.hits(self._sets[i])] += weights[i]
            if count % SUM_CHUNK == 0:  # residues < 2**50: reduce before int64 could overflow
                total %= p
        return total % p

    def membership(self, sets: Ids, probe: Probe) -> tuple[Ids, npt.NDArray[np.int32]]:
        """For each of ``sets``: how many of the probe's rows it holds, and their places
        in the caller's order, set after set (32 bits: a CSR's own index type, so that
        scipy neither scans nor copies them)."""
        places = probe.places
        found = [places[probe.hits(self._sets[i])] for i in sets.tolist()]
        sizes = np.fromiter((f.size for f in found), dtype=np.int64, count=len(found))
        return sizes, np.concatenate(found) if found else np.zeros(0, dtype=np.int32)

    def weighted_rows(self, coefficients: csr_matrix, probe: Probe, p: int) -> npt.NDArray[np.int64]:
        """Dense: row i is, for each of the probe's rows (in the probe's sorted order), the
        sum mod p of ``coefficients[i, j]`` (residues) over the sets j that contain it.
        Each set is intersected once for all the rows that use it (a few rows: cheaper
        than building the sparse product of ``combinations``)."""
        by_set = csc_matrix(coefficients, dtype=np.int64)
        total = np.zeros((coefficients.shape[0], probe.rows.size), dtype=np.int64)
        pointer, rows, values = by_set.indptr, by_set.indices, by_set.data
        for count, j in enumerate(np.flatnonzero(np.diff(pointer)).tolist(), start=1):
            hits = probe.hits(self._sets[j])
            for t in range(int(pointer[j]), int(pointer[j + 1])):
                line = total[int(rows[t])]
                line[hits] += values[t]
            if count % SUM_CHUNK == 0:  # each row gains at most one residue per set
                total %= p
        return total % p

    def combinations(
        self,
        coefficients: csr_matrix,
        probe_of: Callable[[], Probe],
        atom_of: Callable[[RowIds], Ids],
        representative_of: Callable[[Ids], RowIds],
        atoms: int,
        p: int,
    ) -> tuple[csr_matrix, int]:
        """Row i: the sum mod p of ``coefficients[i, j]`` (residues, no stored zeros) over
        the sets j that hold each atom (len(coefficients) x ``atoms``, no stored zeros),
        and how many sets were read. The sets are unions of the atoms ``atom_of`` names
        (rows -> atoms; ``representative_of``: atoms -> one row of each), ``probe_of``
        gives their representatives' probe (built only when a large set is read).

        The small sets' atoms are read together from their rows (``setrows.py``), each
        larger set with a nonzero coefficient by one intersection with the probe; the
        combination is one sparse product. Exact: one int64 product when its sums hold
        at most ``ONE_PRODUCT`` residues, else in 25-bit halves."""
        m = coefficients.shape[0]
        used = distinct(coefficients.indices).astype(np.int64)
        if not used.size:
            return csr_matrix((m, atoms), dtype=np.int64), 0
        kept = self._rows.kept(used)
        small, large = used[kept], used[~kept]
        # sets x atoms, 0/1: the small sets' rows, then the large sets', in one CSR (a
        # vstack of two was 10 % of a late check's samples)
        pointer, columns = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32)
        if small.size:
            part = self._rows.incidence(small, atom_of, representative_of, atoms)
            pointer, columns = part.indptr.astype(np.int64), part.indices.astype(np.int32, copy=False)
        if large.size:
            sizes, held = self.membership(large, probe_of())
            pointer = np.concatenate([pointer, pointer[-1] + np.cumsum(sizes)])
            columns = np.concatenate([columns, held])
        wide = int(pointer[-1]) >= 1 << 31  # over 2**31 entries scipy indexes in int64
        kind = np.int64 if wide else np.int32
        data = np.ones(columns.size, dtype=np.int64)
        membership = csr_matrix((data, columns.astype(kind), pointer.astype(kind)), shape=(used.size, atoms))
        # the sets in the order of the rows: the product sums the same terms exactly
        # (``coefficients[:, order]``, each stored set renumbered to its place in order)
        place = np.empty(used.size, dtype=np.int64)
        place[np.concatenate([np.flatnonzero(kept), np.flatnonzero(~kept)])] = np.arange(used.size)
        column = place[np.searchsorted(used, coefficients.indices)]
        picked = csr_matrix(
            (np.asarray(coefficients.data, dtype=np.int64), column, coefficients.indptr), shape=(m, used.size)
        )
        return product_mod(picked, membership, p), int(used.size)

    def tags(self, coefficients: npt.NDArray[np.int64]) -> tuple[Hashable, ...]:
        """Tags of the sets with a nonzero coefficient."""
        return tuple(self._tags[i] for i in np.flatnonzero(coefficients))

    def nbytes(self) -> int:
        """Memory of the stored bitmaps' containers, the index of their rows and the
        small sets' rows."""
        total = self._index.nbytes() + self._rows.nbytes()
        for stored in self._sets:
            stats = stored.get_statistics()
            total += stats["n_bytes_array_containers"]
            total += stats["n_bytes_run_containers"] + stats["n_bytes_bitset_containers"]
        return total


def product_mod(picked: csr_matrix, member: csr_matrix, p: int) -> csr_matrix:
    """``picked @ member`` mod p without stored zeros, exactly: ``picked`` holds residues
    (int64), ``member`` is 0/1 (sets x columns). One int64 product when each sum adds at
    most ``ONE_PRODUCT`` residues (< 2**50 each), else in 25-bit halves."""
    if picked.shape[1] <= ONE_PRODUCT:
        return _reduced(picked @ member, p)
    high = _halves(picked, picked.data >> HALF) @ member
    low = _halves(picked, picked.data & LOW) @ member
    high.data = mul_mod(high.data % p, (1 << HALF) % p, p)
    return _reduced(high + low, p)


def _halves(matrix: csr_matrix, data: npt.NDArray[np.int64]) -> csr_matrix:
    """``matrix``'s pattern with other values: 25-bit halves, whose products with a 0/1
    matrix sum exactly in int64 over any number of sets."""
    return csr_matrix((data, matrix.indices, matrix.indptr), shape=matrix.shape)


def _reduced(matrix: csr_matrix, p: int) -> csr_matrix:
    """A sparse product or sum (no entry stored twice) mod p without stored zeros. Its
    entries are not sorted: the order of a row's entries changes no decision (the
    callers read rows as sets of entries, or densely)."""
    out = csr_matrix(matrix, dtype=np.int64)
    out.data %= p
    out.eliminate_zeros()
    return out
