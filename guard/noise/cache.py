"""The noise cache: one noisy answer per thing measured, so repeating a query gains nothing.

Averaging n independent noisy answers to the same statistic shrinks the noise by √n;
a cache that returns the first answer again stops that. The key must be *what is
measured*, not the SQL text: Diffix keyed its "sticky" noise on the query and fell to
re-phrasings and set-equality oracles (../shared/AUDITING.md). So a ``NoiseKey`` is

    (data version, table, measure, aggregate, clamping bounds, fingerprint of the row set)

where the fingerprint is HMAC-SHA256 under a secret key of the sorted, distinct ``_rid``
values the cell covers. Two SQL texts that select the same rows share one entry; any
change to the data gives a new version and fresh entries. ε is deliberately not in the
key: asking again with another ε must not buy a second, independent draw.

The HMAC key keeps a stolen state store from being useful as a membership oracle: a
plain hash of a row set could be recomputed for guessed sets; the keyed one cannot.

Persistence follows the ledger's pattern: ``persist(key, value)`` runs before the entry
is stored in memory, and ``entries`` restores a cache at start-up.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt

__all__ = ["NoiseCache", "NoiseKey", "new_fingerprint_key", "row_set_fingerprint"]

_DOMAIN = b"statguard/row-set/v1\x00"
_MIN_KEY_BYTES = 16

V = TypeVar("V")


def new_fingerprint_key() -> bytes:
    """32 fresh random bytes for ``row_set_fingerprint``; store them apart from the cache."""
    return secrets.token_bytes(32)


def row_set_fingerprint(rids: npt.NDArray[np.int64], key: bytes) -> bytes:
    """HMAC-SHA256(key, domain ‖ n ‖ sorted distinct rids as little-endian int64): 32 bytes.

    Order and duplicates in ``rids`` do not matter: the fingerprint is of the *set*.
    The count n is hashed in so no two sets of different sizes can share a message.
    Raises ``TypeError`` unless ``rids`` is a 1-D integer array, ``ValueError`` for a key
    shorter than 16 bytes.
    """
    if len(key) < _MIN_KEY_BYTES:
        raise ValueError(f"the fingerprint key must have at least {_MIN_KEY_BYTES} bytes, got {len(key)}")
    if not isinstance(rids, np.ndarray) or rids.ndim != 1 or not np.issubdtype(rids.dtype, np.integer):
        raise TypeError("rids must be a 1-D numpy array of integer _rid values")
    ids = rids.astype("<i8", copy=False)
    # already strictly increasing (e.g. ORDER BY _rid upstream) is the common case: O(n)
    if ids.size > 1 and not bool(np.all(ids[1:] > ids[:-1])):
        # sort + mask rather than np.unique, which was ~50x slower at 10M ids (NumPy 2.4)
        ids = np.sort(ids)
        ids = ids[np.concatenate(([True], ids[1:] != ids[:-1]))]
    mac = hmac.new(key, _DOMAIN, hashlib.sha256)
    mac.update(ids.size.to_bytes(8, "little"))
    mac.update(np.ascontiguousarray(ids).tobytes())
    return mac.digest()


@dataclass(frozen=True)
class NoiseKey:
    """What one noisy cell measures."""

    data_version: str
    table: str
    #: the measured column, or None for COUNT(*)
    measure: str | None
    #: the aggregate in lower case: ``"count"``, ``"sum"``, ``"avg"``
    aggregate: str
    #: ``row_set_fingerprint`` of the cell's rows
    rows: bytes
    #: the clamping bounds [L, U] of the measure (they change what is measured)
    bounds: tuple[float, float] | None = None


class NoiseCache(Generic[V]):
    """Thread-safe map NoiseKey → released value, with get-or-release semantics.

    ``get_or_release`` guarantees one release per key even under concurrency: callers
    racing on the same key wait for the first, then all receive its value. Keys do not
    block each other. ``persist(key, value)`` runs before the value is stored; if it
    raises, nothing is stored and the exception propagates.
    """

    def __init__(
        self,
        *,
        entries: Iterable[tuple[NoiseKey, V]] = (),
        persist: Callable[[NoiseKey, V], None] | None = None,
    ) -> None:
        self._entries: dict[NoiseKey, V] = dict(entries)
        self._persist = persist
        self._lock = threading.Lock()
        # one lock per key being released, so a slow release does not stall other keys
        self._releasing: dict[NoiseKey, threading.Lock] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def get(self, key: NoiseKey) -> V | None:
        """The value released for ``key``, or None."""
        with self._lock:
            return self._entries.get(key)

    def get_or_release(self, key: NoiseKey, release: Callable[[], V]) -> tuple[V, bool]:
        """The cached value for ``key`` (``fresh`` False), or ``release()``'s, cached (True).

        ``release`` is where the caller charges the budget and draws the noise; it runs
        at most once per key at a time. If it raises, nothing is cached and a later call
        may try again (a refused charge must not poison the key).
        """
        with self._lock:
            if key in self._entries:
                return self._entries[key], False
            key_lock = self._releasing.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._entries:
                    return self._entries[key], False
            value = release()
            if self._persist is not None:
                self._persist(key, value)
            with self._lock:
                self._entries[key] = value
                # safe to drop: from now on every caller finds the entry before the lock
                self._releasing.pop(key, None)
            return value, True
