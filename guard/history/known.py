"""Query sets an audit state already knows to lie in its span.

Asking a released cell again (a repeat, or the same cell inside a later answer) took a
whole step: gather the secret weights, plan the cut, derive that the residual is zero.
A repeat of bench_core's q12 (8,000 cells) at 1,000,000 rows spent 4 of its 6 s there.
The span of a state only grows (releases add rows; nothing is ever taken back within one
data version), so a set once in it stays in it, and the answer may be remembered.

Exact, not probabilistic: a set is found by a digest of its sorted row ids and then
confirmed by comparing its rows with the set kept: a released set's own bitmap among
the stored sets (no copy), or, for a set found implied, a copy, as long as the copies
stay under :data:`MAX_IMPLIED_ROWS` row ids in all (past that, implied sets are derived
again each time, as before).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from pyroaring import BitMap

from guard.history.released import ReleasedSets
from guard.history.rowsets import RowIds, as_bitmap, fingerprint
from guard.history.steps import Step

__all__ = ["MAX_IMPLIED_ROWS", "KnownSets"]

#: row ids the copies of implied sets may hold together, per state (<= 4 bytes each)
MAX_IMPLIED_ROWS = 1_000_000


class KnownSets:
    """The query sets known to lie in one :class:`~guard.history.span.SpanAuditor`'s span."""

    def __init__(self, released: ReleasedSets) -> None:
        self._released = released
        self._stored: dict[bytes, int] = {}  # digest -> index among the released sets
        self._implied: dict[bytes, BitMap] = {}
        self._implied_rows = 0
        # the last set found known, as a copy: a screen asks ``implied`` and then
        # ``release`` of the same set, and a copy compares faster than a bitmap is built
        self._last: tuple[RowIds, bytes] | None = None

    def lookup(self, rows: RowIds, step_of: Callable[[RowIds], Step]) -> tuple[Step | None, bytes]:
        """The step that would release ``rows`` (sorted, distinct), or None when the set
        is implied: known to lie in the span, or found so by ``step_of(rows)`` (then
        remembered); and the set's digest, for :meth:`add_released`."""
        if self._last is not None and np.array_equal(self._last[0], rows):
            return None, self._last[1]
        key = fingerprint(rows)
        index = self._stored.get(key)
        copy = self._implied.get(key)
        if (index is not None and self._released.equals(index, as_bitmap(rows))) or (
            copy is not None and copy == as_bitmap(rows)
        ):
            self._last = (rows.copy(), key)
            return None, key
        step = step_of(rows)
        if step.growth is None:
            self._remember_implied(key, rows)
            return None, key
        return step, key

    def add_released(self, key: bytes) -> None:
        """The set with digest ``key`` (from :meth:`lookup`) was just stored as the last
        released set."""
        self._stored[key] = len(self._released) - 1

    def _remember_implied(self, key: bytes, rows: RowIds) -> None:
        if key in self._implied or self._implied_rows + rows.size > MAX_IMPLIED_ROWS:
            return
        self._implied[key] = as_bitmap(rows)
        self._implied_rows += int(rows.size)

    def nbytes(self) -> int:
        """Memory of the digests and the implied sets' copies (bitmap containers)."""
        copies = 0
        for stored in self._implied.values():
            stats = stored.get_statistics()
            copies += stats["n_bytes_array_containers"]
            copies += stats["n_bytes_run_containers"] + stats["n_bytes_bitset_containers"]
        return copies + 48 * (len(self._stored) + len(self._implied))
