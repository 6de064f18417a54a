"""``ReleasedSets.column`` (which released sets hold a row: an atom's column of M) read
through its inverted index of blocks is, after every append, what a test of each set
gives. The oracle keeps each set as a Python set of the rows appended."""

from __future__ import annotations

import numpy as np
import pytest

from guard.history.released import _BLOCK, ReleasedSets


@pytest.mark.parametrize("seed", range(3))
def test_a_column_lists_exactly_the_sets_holding_the_row(seed: int) -> None:
    rng = np.random.default_rng(seed)
    released = ReleasedSets()
    oracle: list[set[int]] = []
    universe = 3_000
    # past several merges of the index's blocks (1, 2, 4, ... blocks of _BLOCK sets)
    for step in range(9 * _BLOCK + 5):
        size = int(rng.choice([0, 1, 3, 40, universe]))  # empty, small, large, every row
        rows = np.unique(rng.choice(universe, size=size)) if size < universe else np.arange(universe)
        released.append(rows, tag=step)
        oracle.append(set(rows.tolist()))
        if step % 7 == 0 or step > 8 * _BLOCK:
            for row in [*rng.choice(universe, size=5).tolist(), 0, universe - 1, universe + 10]:
                expected = np.array([row in s for s in oracle], dtype=bool)
                assert np.array_equal(released.column(row), expected), (step, row)
    assert len(released) == len(oracle)
