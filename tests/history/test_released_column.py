"""``ReleasedSets.column`` (which released sets hold a row: an atom's column of M) read
through its inverted index (blocks of pairs for small sets, lines of bits for large
ones) is, after every append, what a test of each set gives. The oracle keeps each set
as a Python set of the rows appended."""

from __future__ import annotations

import numpy as np
import pytest
from pyroaring import BitMap

from guard.history.inverted import BLOCK, InvertedIndex
from guard.history.released import ReleasedSets


@pytest.mark.parametrize("seed", range(3))
def test_a_column_lists_exactly_the_sets_holding_the_row(seed: int) -> None:
    rng = np.random.default_rng(seed)
    universe = 3_001  # not a multiple of 8: the last byte of a line of bits is partly used
    released = ReleasedSets(universe)
    oracle: list[set[int]] = []
    # past several merges of the index's blocks (1, 2, 4, ... blocks of BLOCK sets)
    for step in range(9 * BLOCK + 5):
        size = int(rng.choice([0, 1, 3, 40, 300, universe]))  # empty, pairs (<= N/64), lines, every row
        rows = np.unique(rng.choice(universe, size=size)) if size < universe else np.arange(universe)
        released.append(rows, tag=step)
        oracle.append(set(rows.tolist()))
        if step % 7 == 0 or step > 8 * BLOCK:
            for row in [*rng.choice(universe, size=5).tolist(), 0, universe - 1, universe + 10]:
                expected = np.array([row in s for s in oracle], dtype=bool)
                assert np.array_equal(released.column(row), expected), (step, row)
    assert len(released) == len(oracle)


def test_the_index_costs_at_most_a_line_of_bits_per_set() -> None:
    """Each set is indexed in the cheaper form: a large set as N bits, not 8 bytes a row
    (session 17's pairs cost 16 bytes a row: 263 MB after 1,000 queries on 1M rows)."""
    universe, sets = 100_000, 3 * BLOCK
    rng = np.random.default_rng(0)
    stored = []
    for _ in range(sets):
        size = int(rng.integers(1, universe))
        stored.append(BitMap(np.sort(rng.choice(universe, size=size, replace=False)).astype(np.uint32)))
    index = InvertedIndex(universe)
    index.catch_up(stored)
    assert index.sets == sets
    line = universe / 8
    assert index.nbytes() <= 2 * line * sets + 4096  # the last array of lines may be half used
    # and the sets a row is in are found, whichever form holds them
    for row in rng.choice(universe, size=20).tolist():
        expected = [i for i, s in enumerate(stored) if row in s]
        assert sorted(index.holding(row).tolist()) == expected


def test_a_set_outside_the_rows_is_refused() -> None:
    index = InvertedIndex(100)
    with pytest.raises(ValueError, match="outside"):
        index.catch_up([BitMap([5, 100])] * BLOCK)
