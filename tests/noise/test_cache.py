"""The noise cache: keyed on the row set, one release per key, and averaging gains nothing."""

from __future__ import annotations

import statistics
import threading
import time

import numpy as np
import pytest

from guard.noise.budget import BudgetExceeded, Ledger
from guard.noise.cache import NoiseCache, NoiseKey, new_fingerprint_key, row_set_fingerprint
from guard.noise.mechanisms import NoisyValue, noisy_sum
from guard.noise.sampling import InsecureSeededSource

KEY = b"k" * 32
BOUNDS = (1000.0, 100000.0)


def _key(rids: list[int], *, version: str = "v1", aggregate: str = "sum") -> NoiseKey:
    fingerprint = row_set_fingerprint(np.array(rids, dtype=np.int64), KEY)
    return NoiseKey(version, "admissions", "income", aggregate, fingerprint, BOUNDS)


def test_fingerprint_is_of_the_set_not_the_sequence() -> None:
    ordered = row_set_fingerprint(np.array([1, 2, 3, 10], dtype=np.int64), KEY)
    assert row_set_fingerprint(np.array([10, 3, 1, 2], dtype=np.int64), KEY) == ordered
    assert row_set_fingerprint(np.array([3, 1, 10, 2, 3], dtype=np.int64), KEY) == ordered
    assert row_set_fingerprint(np.array([1, 2, 3, 10], dtype=np.int32), KEY) == ordered
    assert len(ordered) == 32


def test_fingerprint_separates_sets_and_keys() -> None:
    base = row_set_fingerprint(np.array([1, 2, 3], dtype=np.int64), KEY)
    assert row_set_fingerprint(np.array([1, 2], dtype=np.int64), KEY) != base
    assert row_set_fingerprint(np.array([1, 2, 4], dtype=np.int64), KEY) != base
    assert row_set_fingerprint(np.array([1, 2, 3], dtype=np.int64), new_fingerprint_key()) != base
    assert row_set_fingerprint(np.array([], dtype=np.int64), KEY) != base


@pytest.mark.parametrize(
    ("rids", "key", "error", "message"),
    [
        (np.array([1.0, 2.0]), KEY, TypeError, "integer _rid"),
        (np.array([[1, 2]], dtype=np.int64), KEY, TypeError, "1-D"),
        ([1, 2], KEY, TypeError, "numpy array"),
        (np.array([1], dtype=np.int64), b"short", ValueError, "at least 16 bytes"),
    ],
)
def test_fingerprint_rejects_bad_input(
    rids: object, key: bytes, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        row_set_fingerprint(rids, key)  # type: ignore[arg-type]


def test_get_or_release_releases_once_per_key() -> None:
    cache: NoiseCache[float] = NoiseCache()
    draws = iter([1.0, 2.0, 3.0])
    assert cache.get_or_release(_key([1, 2]), lambda: next(draws)) == (1.0, True)
    assert cache.get_or_release(_key([2, 1]), lambda: next(draws)) == (1.0, False)  # same rows
    assert cache.get_or_release(_key([1, 2], version="v2"), lambda: next(draws)) == (2.0, True)
    assert cache.get_or_release(_key([1, 2], aggregate="avg"), lambda: next(draws)) == (3.0, True)
    assert len(cache) == 3
    assert cache.get(_key([1, 2])) == 1.0
    assert cache.get(_key([1, 2, 3])) is None


def test_a_failed_release_caches_nothing_and_can_be_retried() -> None:
    cache: NoiseCache[float] = NoiseCache()

    def refused() -> float:
        raise BudgetExceeded("no budget", account="global", requested=1, remaining=0)  # type: ignore[arg-type]

    with pytest.raises(BudgetExceeded):
        cache.get_or_release(_key([1]), refused)
    assert cache.get(_key([1])) is None
    assert cache.get_or_release(_key([1]), lambda: 5.0) == (5.0, True)


def test_persist_runs_before_storing_and_entries_restore() -> None:
    stored: list[tuple[NoiseKey, float]] = []

    def persist(key: NoiseKey, value: float) -> None:
        if value < 0:
            raise OSError("disk full")
        stored.append((key, value))

    cache: NoiseCache[float] = NoiseCache(persist=persist)
    with pytest.raises(OSError):
        cache.get_or_release(_key([1]), lambda: -1.0)
    assert cache.get(_key([1])) is None
    cache.get_or_release(_key([1]), lambda: 7.0)
    assert stored == [(_key([1]), 7.0)]
    restored: NoiseCache[float] = NoiseCache(entries=stored)
    assert restored.get_or_release(_key([1]), lambda: 8.0) == (7.0, False)


def test_concurrent_requests_for_one_key_get_one_release() -> None:
    cache: NoiseCache[int] = NoiseCache()
    releases: list[int] = []
    start = threading.Barrier(16)
    answers: list[int] = []

    def release() -> int:
        time.sleep(0.01)  # long enough for every other thread to arrive
        releases.append(len(releases))
        return len(releases)

    def ask() -> None:
        start.wait()
        answers.append(cache.get_or_release(_key([4, 5, 6]), release)[0])

    threads = [threading.Thread(target=ask) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(releases) == 1
    assert answers == [1] * 16


def test_averaging_a_differencing_pair_gains_nothing() -> None:
    """Ms. Rich's income from SUM(town) - SUM(town without her), asked 100 times.

    The second query is a re-phrasing that selects the same rows as any other phrasing
    of "everyone but her", so the cache answers it, too, from the first release.
    """
    incomes = [1000, 2000, 3000, 2000, 1000, 6000, 2000, 10000, 2000, 4000, 100000]
    rids = np.arange(100, 111, dtype=np.int64)  # Ms. Rich is row 110
    with_rich, without_rich = rids, rids[:-1][::-1]  # a different order: another SQL text
    rng = InsecureSeededSource(2012)
    ledger = Ledger(global_limit=100, analyst_limits={"mallory": 10})
    cache: NoiseCache[NoisyValue] = NoiseCache()

    def ask(rows: np.ndarray, total: float) -> float:
        key = NoiseKey("v1", "admissions", "income", "sum", row_set_fingerprint(rows, KEY), BOUNDS)

        def release() -> NoisyValue:
            ledger.charge("mallory", 1)
            return noisy_sum(total, BOUNDS, 1, rng=rng)

        return cache.get_or_release(key, release)[0].value

    estimates = [ask(with_rich, sum(incomes)) - ask(without_rich, sum(incomes[:-1])) for _ in range(100)]
    assert len(set(estimates)) == 1  # every repeat is the identical answer
    assert statistics.fmean(estimates) == estimates[0]  # so the average is no better
    assert ledger.spent("mallory") == 2  # and repeats cost nothing

    # Without the cache the attack works: the mean of 100 fresh differences is ~10x closer.
    fresh = [
        noisy_sum(sum(incomes), BOUNDS, 1, rng=rng).value
        - noisy_sum(sum(incomes[:-1]), BOUNDS, 1, rng=rng).value
        for _ in range(100)
    ]
    single_error = statistics.pstdev(fresh)
    assert abs(statistics.fmean(fresh) - 100000) < single_error / 3
