"""Query sets: the surrogate row ids ``_rid`` a released cell aggregates over.

A query set arrives as a numpy integer array (any order, duplicates allowed) or a
pyroaring ``BitMap``; the audit works on sorted unique int64 arrays and keeps history as
bitmaps (compressed, fast membership and intersection counts). Row ids must fit in
uint32, the range of ``BitMap``.
"""

from __future__ import annotations

import array
import hashlib

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap

from guard.arrays import distinct

__all__ = ["MAX_ROW_ID", "QuerySet", "RowIds", "as_bitmap", "as_row_ids", "fingerprint"]

RowIds = npt.NDArray[np.int64]
QuerySet = npt.NDArray[np.integer] | BitMap

#: the largest row id a query set may hold (BitMap stores uint32)
MAX_ROW_ID = (1 << 32) - 1


def as_row_ids(query_set: QuerySet, universe: int | None = None) -> RowIds:
    """The query set as a sorted, duplicate-free int64 array.

    Raises ValueError for a non-integer array, a row id below 0, or one at or above
    ``universe`` (the number of rows) when it is given.
    """
    if isinstance(query_set, BitMap):
        rows = np.frombuffer(query_set.to_array(), dtype=np.uint32).astype(np.int64)
    else:
        raw = np.asarray(query_set)
        if raw.ndim != 1 or not (raw.size == 0 or np.issubdtype(raw.dtype, np.integer)):
            raise ValueError(
                f"a query set must be a 1-d integer array of row ids, got {raw.dtype} {raw.shape}"
            )
        rows = raw.astype(np.int64, copy=False)
        if rows.size > 1 and not bool(np.all(rows[1:] > rows[:-1])):
            rows = distinct(rows)
    if rows.size:
        upper = MAX_ROW_ID if universe is None else universe - 1
        if rows[0] < 0 or rows[-1] > upper:
            raise ValueError(
                f"query set holds row id {int(rows[0]) if rows[0] < 0 else int(rows[-1])} outside "
                f"0..{upper}; row ids must be the table's surrogate _rid values"
            )
    return rows


def as_bitmap(query_set: QuerySet) -> BitMap:
    """The query set as a ``BitMap`` (built from a uint32 buffer, ~7x faster than from numpy)."""
    if isinstance(query_set, BitMap):
        return query_set
    rows = as_row_ids(query_set)
    return BitMap(array.array("I", rows.astype(np.uint32).tobytes()))


def fingerprint(rows: RowIds) -> bytes:
    """A collision-resistant digest of a sorted row-id array: equal sets, equal digests.

    The last array digested is remembered (a private copy, and its digest): a screen asks
    for the digest of one query set three times (the known sets' lookup before and at its
    release, and the screen's own record of withheld sets), and comparing a copy costs a
    thirtieth of hashing it (60,000 row ids: 13 against 470 us). Equal values, equal
    digest: the answer is the one hashing would give."""
    values = np.ascontiguousarray(rows, dtype=np.int64)
    last = _last_digested  # one read: another thread may replace it meanwhile
    if last is not None and np.array_equal(last[0], values):
        return last[1]
    digest = hashlib.blake2b(values.tobytes(), digest_size=16).digest()
    _remember_digest(values.copy(), digest)
    return digest


#: the last array :func:`fingerprint` hashed (a copy no one else holds) and its digest
_last_digested: tuple[RowIds, bytes] | None = None


def _remember_digest(values: RowIds, digest: bytes) -> None:
    global _last_digested
    _last_digested = (values, digest)
