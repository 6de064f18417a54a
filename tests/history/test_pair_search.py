"""The pair search's lookup of opposite residues: both of its strategies (a direct
comparison per moved position, one sorted copy for many) find exactly the positions a
brute-force double loop finds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.history import pairs

P = 101  # a small prime, so opposite residues are frequent


def brute_force(keys: np.ndarray, positions: list[int]) -> list[tuple[int, list[int]]]:
    found = []
    for j in positions:
        others = [o for o in range(len(keys)) if (keys[o] + keys[j]) % P == 0]
        if others:
            found.append((j, others))
    return found


@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(st.integers(min_value=0, max_value=P - 1), min_size=1, max_size=80),
    data=st.data(),
    direct=st.sampled_from([0, 1_000]),
)
def test_both_strategies_find_every_opposite_key(keys: list[int], data: st.DataObject, direct: int) -> None:
    array = np.array(keys, dtype=np.int64)
    positions = data.draw(st.lists(st.integers(0, len(keys) - 1), unique=True, max_size=len(keys)))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pairs, "_DIRECT_SEARCHES", direct)
        assert pairs.opposite_keys(array, positions, P) == brute_force(array, positions)
