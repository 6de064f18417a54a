"""The group search's classifier of small atoms (fewer than k units, or inside one
sensitive set) after a tentative query agrees with counting every atom's rows afresh,
whatever it remembers across releases (a part of an atom remembered small is small)."""

from __future__ import annotations

import numpy as np
import pytest

from guard.history.groups import GroupSearch
from guard.history.span import SpanAuditor
from tests.history.test_groups import _units_of


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("sensitive", [False, True])
def test_small_atoms_after_a_query_are_counted_as_afresh(seed: int, sensitive: bool) -> None:
    rng = np.random.default_rng(7300 + seed)
    n = 400
    unit_of_row = rng.integers(0, 260, size=n)  # some units hold several rows
    sets = np.where(rng.random(n) < 0.3, rng.integers(0, 12, size=n), -1) if sensitive else None
    units = _units_of(unit_of_row)
    search = GroupSearch(4, units, None if sets is None else sets.astype(np.int64))
    auditor = SpanAuditor(np.arange(n))
    checked = remembered = 0
    for _ in range(60):
        if rng.random() < 0.5:
            q = np.sort(rng.choice(n, size=int(rng.integers(3, 40)), replace=False))
        else:
            start = int(rng.integers(0, n - 2))
            q = np.arange(start, int(rng.integers(start + 1, n)) + 1)
        exposure = auditor.exposure(q)
        if exposure is None:
            continue
        cut = exposure.step.cut
        parents = dict(zip(cut.children.tolist(), cut.split.tolist(), strict=True))
        small_of = search._classifier(exposure.partition, exposure.changed_atoms(), exposure.rows_of, parents)
        atoms = np.arange(exposure.atom_count, dtype=np.int64)
        expected = np.array([search._protectable(exposure.rows_of(int(a))) for a in atoms])
        assert (small_of(atoms) == expected).all()
        checked += 1
        remembered += int((search._flag[cut.split] == 1).sum())  # parts of atoms remembered small
        auditor.release(q)
        search.tidy(auditor)  # remembers committed atoms' flags, as the screen does
    assert checked > 20
    assert remembered > 0
