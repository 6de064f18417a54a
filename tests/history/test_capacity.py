"""The history's arrays grow by doubling, but never past a bound the caller knows (atoms
never outnumber rows), so a state near its bound does not hold twice its size."""

from __future__ import annotations

import numpy as np

from guard.history.atoms import AtomPartition
from guard.history.capacity import grown


def test_doubling_stops_at_the_bound() -> None:
    array = np.arange(6, dtype=np.int64)
    assert grown(array, 4) is array  # room enough: the same array
    assert grown(array, 7).shape == (12,)
    bounded = grown(array, 7, -1, at_most=9)
    assert bounded.shape == (9,) and bounded[:6].tolist() == list(range(6)) and set(bounded[6:]) == {-1}
    assert grown(array, 10, 0, at_most=9).shape == (10,)  # what is needed, whatever the bound


def test_a_partition_holds_no_more_atoms_than_rows() -> None:
    rows = 100
    partition = AtomPartition.one_unit_per_row(rows)
    for row in range(rows - 1):  # every row its own atom at the end
        partition.refine(np.array([row]))
    assert partition.atom_count == rows
    # three int64 arrays over the rows, a flag a row, three int64 arrays over the atoms:
    # the atoms' arrays hold 100 entries, not the 128 of a doubling from 64
    assert partition.nbytes() <= (3 * 8 + 1 + 3 * 8) * rows
