"""``guard.arrays``: ``distinct`` is ``np.unique`` on integer arrays; ``runs`` is the slices end to end."""

from __future__ import annotations

import numpy as np
import pytest

from guard.arrays import distinct, runs


@pytest.mark.parametrize("seed", range(5))
def test_distinct_is_numpys_unique(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for size in (0, 1, 2, 7, 1_000):
        for dtype in (np.int64, np.int32, np.uint32, np.int8):
            values = rng.integers(0, 50, size).astype(dtype)
            got, expected = distinct(values), np.unique(values)
            assert got.dtype == expected.dtype
            assert np.array_equal(got, expected)
    matrix = rng.integers(-3, 3, (4, 5))
    assert np.array_equal(distinct(matrix), np.unique(matrix))
    assert distinct([True, False, True]).tolist() == [False, True]


def test_runs_are_the_slices_end_to_end() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        count = int(rng.integers(0, 8))
        starts = rng.integers(0, 1000, count)
        lengths = rng.integers(0, 6, count)
        want = [s + i for s, n in zip(starts.tolist(), lengths.tolist(), strict=True) for i in range(n)]
        got = runs(starts, lengths)
        assert got.dtype == np.int64
        assert got.tolist() == want
