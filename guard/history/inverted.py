"""Which released sets hold a row: an atom's column of M, read from an inverted index.

The span audit asks for one atom's column at every basis exchange and border (which
released sets hold the atom's representative row). A test per stored bitmap costs
~160 ns a set in Python, milliseconds a column at thousands of sets, so the sets are
indexed in blocks once ``BLOCK`` of them wait (the last few are tested one by one).

A set that is a box over the finest cells (``boxes.py``: per dimension, the values its
rows have, and no other row) is kept as one: a bit per value of each dimension. Every
set of one data version's conjunctive queries is; the forms below are for the rest (sets
over lineage pieces, tests). Each other set is indexed in the cheaper of two forms, so
the index never costs more than
N/8 bytes a set (N the rows; 512 bytes on tables of fewer than 4,096 rows). That is
still more than the stored bitmaps, which runs compress (on 1M rows: lines of 20 KB
against ~6 KB a bitmap), and the largest part of the audit state's growth (runs would
not help: a large set there has a median of 3,646 runs of consecutive row ids):

- a small set (``setrows.small_limit``: at most N/64 rows) as (row, set) pairs, 8 bytes
  each, in blocks sorted by row
  (a binary counter of merges: O(log sets) blocks, each pair re-sorted O(log sets) times);
- a larger set as one line of N bits, ``_CHUNK`` lines to an array, read down one byte
  column for a row.

(Session 17 indexed every set as 16-byte pairs: 263 MB after 1,000 random queries on
1M rows, beside 61 MB for everything else, and growing with every large set.)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap

from guard.history.boxes import BoxCodes, BoxIndex
from guard.history.capacity import grown
from guard.history.setrows import small_limit

__all__ = ["BLOCK", "InvertedIndex"]

#: sets in the smallest block of pairs (the sets after the last block are tested one by one)
BLOCK = 64
#: lines of N bits in one array of the dense form
_CHUNK = 256


class InvertedIndex:
    """The sets holding each of ``universe`` rows, for the first ``sets`` of a list of
    stored sets that only grows (``catch_up``)."""

    def __init__(self, universe: int, boxes: BoxCodes | None = None) -> None:
        self._universe = universe
        if boxes is not None and boxes.rows != universe:
            raise ValueError(f"the box codes label {boxes.rows} rows, not the {universe} indexed")
        #: the box form (``boxes.py``), when the rows' dimension values are known
        self._boxes = None if boxes is None else BoxIndex(boxes)
        self._width = (universe + 7) // 8  # bytes of a line of N bits
        self._small = small_limit(universe)  # rows of a set kept as pairs, at most
        #: the pair form: per block its rows (sorted), the set of each, and how many sets it covers
        self._blocks: list[tuple[npt.NDArray[np.uint32], npt.NDArray[np.int32], int]] = []
        #: the line form: arrays of ``_CHUNK`` lines, and the set of each line used
        self._chunks: list[npt.NDArray[np.uint8]] = []
        self._owners = np.zeros(16, dtype=np.int64)
        self._lines = 0
        #: the sets indexed: the first ``sets`` of the list
        self.sets = 0

    def catch_up(self, sets: Sequence[BitMap]) -> None:
        """Index the waiting sets of ``sets`` (the list the earlier calls indexed, grown)
        once ``BLOCK`` of them wait."""
        if len(sets) - self.sets < BLOCK:
            return
        first, last = self.sets, len(sets)
        parts: list[npt.NDArray[np.uint32]] = []
        owners: list[int] = []
        for i in range(first, last):
            rows = np.frombuffer(sets[i].to_array(), dtype=np.uint32)
            if rows.size and int(rows[-1]) >= self._universe:
                raise ValueError(f"set {i} holds row {int(rows[-1])}, outside the {self._universe} rows")
            # the cheapest form that holds the set exactly (a box only when it is one)
            other = 64 * rows.size if rows.size <= self._small else self._universe
            if self._boxes is not None and self._boxes.bits <= other and self._boxes.add(rows, i):
                continue
            if rows.size <= self._small:
                parts.append(rows)
                owners.append(i)
            else:
                self._add_line(rows, i)
        if parts:
            self._add_block(parts, owners, last - first)
        self.sets = last

    def holding(self, row: int) -> npt.NDArray[np.int64]:
        """The indexed sets that hold ``row`` (in no particular order)."""
        found = []
        if not 0 <= row < self._universe:
            return np.zeros(0, dtype=np.int64)
        if self._boxes is not None:
            found.append(self._boxes.holding(row))
        # the keys in the rows' own dtype: a tuple of ints would cast every block to int64
        keys = np.array((row, row + 1), dtype=np.uint32)
        for rows, owners, _ in self._blocks:
            lo, hi = np.searchsorted(rows, keys).tolist()
            if hi > lo:
                found.append(owners[lo:hi].astype(np.int64))
        if self._lines:
            column = np.concatenate([chunk[:, row >> 3] for chunk in self._chunks])[: self._lines]
            found.append(self._owners[: self._lines][(column >> (row & 7)) & 1 == 1])
        return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)

    def nbytes(self) -> int:
        """Memory of the index: its blocks of pairs and its arrays of lines (all allocated)."""
        pairs = sum(rows.nbytes + owners.nbytes for rows, owners, _ in self._blocks)
        if self._boxes is not None:
            pairs += self._boxes.nbytes()
        return pairs + sum(chunk.nbytes for chunk in self._chunks) + self._owners.nbytes

    def _add_line(self, rows: npt.NDArray[np.uint32], owner: int) -> None:
        if self._lines == len(self._chunks) * _CHUNK:
            self._chunks.append(np.zeros((_CHUNK, self._width), dtype=np.uint8))
        line = np.zeros(self._width * 8, dtype=bool)
        line[rows] = True
        self._chunks[-1][self._lines % _CHUNK] = np.packbits(line, bitorder="little")
        self._owners = grown(self._owners, self._lines + 1)
        self._owners[self._lines] = owner
        self._lines += 1

    def _add_block(self, parts: list[npt.NDArray[np.uint32]], owners: list[int], sets: int) -> None:
        rows = np.concatenate(parts)
        who = np.repeat(np.array(owners, dtype=np.int32), [part.size for part in parts])
        block = _sorted(rows, who, sets)
        # a block merges with the one before while that one covers no more sets
        while self._blocks and self._blocks[-1][2] <= block[2]:
            before = self._blocks.pop()
            block = _sorted(
                np.concatenate([before[0], block[0]]),
                np.concatenate([before[1], block[1]]),
                before[2] + block[2],
            )
        self._blocks.append(block)


def _sorted(
    rows: npt.NDArray[np.uint32], owners: npt.NDArray[np.int32], sets: int
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int32], int]:
    order = np.argsort(rows, kind="stable")
    return rows[order], owners[order], sets
