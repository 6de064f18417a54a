"""Overlap control (Dobkin, Jones & Lipton 1979): a cheap first line before the span audit.

Each new query set may share at most ``max_overlap`` rows, or privacy units when a
unit map is given, with every query set released before. With query sets of at least
k units overlapping pairwise in at most r, compromising one value takes at least
1 + (k - (l + 1)) / r queries for an attacker who already knows l values. It is
coarse (it refuses many harmless queries, and says nothing about unions of queries),
which is why the exact span audit follows it.

A repeat of a released query set is exempt: it reveals nothing new (the guard answers
it from the same released value). Decisions read query sets only, never values.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap

from guard.arrays import distinct
from guard.history.rowsets import QuerySet, as_bitmap, as_row_ids, fingerprint

__all__ = ["OverlapControl", "OverlapViolation", "overlaps_any"]


@dataclass(frozen=True)
class OverlapViolation:
    """An earlier release (by tag) sharing more than the allowed rows/units with the candidate."""

    earlier: Hashable
    overlap: int


class OverlapControl:
    """Remembers released query sets and tests new ones against ``max_overlap`` (>= 0).

    ``unit_of_row[rid]`` (optional) counts overlap in distinct privacy units instead of
    rows, so one respondent with many rows counts once.
    """

    def __init__(self, max_overlap: int, unit_of_row: npt.ArrayLike | None = None) -> None:
        if max_overlap < 0:
            raise ValueError(f"max_overlap={max_overlap} must be >= 0 (shared rows or units allowed)")
        self.max_overlap = max_overlap
        self._unit_of_row = None
        if unit_of_row is not None:
            _, codes = np.unique(np.asarray(unit_of_row), return_inverse=True)
            self._unit_of_row = codes.astype(np.int64).reshape(-1)
        self._released: list[BitMap] = []
        self._tags: list[Hashable] = []
        self._seen: set[bytes] = set()

    def __len__(self) -> int:
        return len(self._released)

    def violations(self, query_set: QuerySet, limit: int | None = None) -> list[OverlapViolation]:
        """Earlier releases that ``query_set`` overlaps too much (at most ``limit`` of them).

        Empty for a repeat of a released set. Changes nothing.
        """
        rows = as_row_ids(query_set, None if self._unit_of_row is None else self._unit_of_row.size)
        if fingerprint(rows) in self._seen:
            return []
        members = self._members(rows)
        found = []
        for earlier, tag in zip(self._released, self._tags, strict=True):
            shared = earlier.intersection_cardinality(members)
            if shared > self.max_overlap:
                found.append(OverlapViolation(tag, shared))
                if limit is not None and len(found) >= limit:
                    break
        return found

    def record(self, query_set: QuerySet, tag: Hashable = None) -> None:
        """Remember ``query_set`` as released (a repeat is not stored twice)."""
        rows = as_row_ids(query_set, None if self._unit_of_row is None else self._unit_of_row.size)
        key = fingerprint(rows)
        if key in self._seen:
            return
        self._seen.add(key)
        self._released.append(self._members(rows))
        self._tags.append(tag)

    def _members(self, rows: npt.NDArray[np.int64]) -> BitMap:
        if self._unit_of_row is None:
            return as_bitmap(rows)
        return as_bitmap(distinct(self._unit_of_row[rows]))


def overlaps_any(
    ids: npt.NDArray[np.int64],
    released: Sequence[BitMap],
    seen: Container[bytes],
    units: Callable[[npt.NDArray[np.int64]], int],
    limit: int,
) -> bool:
    """Whether query set ``ids`` shares more than ``limit`` privacy units (``units`` counts
    them) with one of the ``released`` sets; a repeat (its digest in ``seen``) is exempt:
    it reveals nothing new. The online screen's form of :class:`OverlapControl`."""
    if fingerprint(ids) in seen:
        return False
    candidate = as_bitmap(ids)
    for earlier in released:
        shared = earlier & candidate
        if shared and units(np.fromiter(shared, dtype=np.int64)) > limit:
            return True
    return False
