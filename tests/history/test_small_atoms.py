"""The group search's classifier of small atoms (fewer than k units, or inside one
sensitive set) after a tentative query agrees with counting every atom's rows afresh,
whatever it remembers across releases (a part of an atom remembered small is small)."""

from __future__ import annotations

import numpy as np
import pytest
from pyroaring import BitMap

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
        changed = exposure.changed_atoms()
        small_of = search._small.classifier(exposure.partition, changed, exposure.rows_of, parents)
        atoms = np.arange(exposure.atom_count, dtype=np.int64)
        expected = np.array([search._small.protectable(exposure.rows_of(int(a))) for a in atoms])
        assert (small_of(atoms) == expected).all()
        checked += 1
        remembered += int((search._small._flag[cut.split] == 1).sum())  # parts of atoms remembered small
        auditor.release(q)
        search.tidy(auditor)  # remembers committed atoms' flags, as the screen does
    assert checked > 20
    assert remembered > 0


class _Weighted:
    """Units of auditor rows that share no unit (finest cells of a table with one row per
    person): row i holds ``weight[i]`` units of its own, so units add up (``disjoint``)."""

    disjoint = True

    def __init__(self, weight: np.ndarray) -> None:
        self.offsets = np.concatenate([[0], np.cumsum(weight)])

    def unit_ids(self, rows: np.ndarray) -> BitMap:
        found = BitMap()
        for i in np.asarray(rows, dtype=np.int64).tolist():
            found.add_range(int(self.offsets[i]), int(self.offsets[i + 1]))
        return found

    def units(self, rows: np.ndarray) -> int:
        return len(self.unit_ids(rows))  # counted from the ids, not by adding weights


@pytest.mark.parametrize("seed", range(6))
def test_outside_parts_counted_by_subtraction_are_counted_as_afresh(seed: int) -> None:
    """Where units add up, a cut atom remembered large has its outside part's units as
    its own less its inside part's (never reading the outside rows): the flags are those
    of counting every part's rows afresh, and the subtraction is taken."""
    rng = np.random.default_rng(7400 + seed)
    n = 300
    units = _Weighted(rng.integers(0, 3, size=n))  # empty finest cells too
    search = GroupSearch(6, units)
    assert search._small.subtract
    auditor = SpanAuditor(np.arange(n))
    checked = subtracted = 0
    for _ in range(60):
        start = int(rng.integers(0, n - 2))
        q = np.arange(start, min(n, start + int(rng.integers(2, 30))))
        if rng.random() < 0.5:
            q = np.sort(rng.choice(n, size=int(rng.integers(3, 30)), replace=False))
        exposure = auditor.exposure(q)
        if exposure is None:
            continue
        cut = exposure.step.cut
        parents = dict(zip(cut.children.tolist(), cut.split.tolist(), strict=True))
        reads: list[int] = []

        def rows_of(atom: int, exposure=exposure, reads=reads) -> np.ndarray:  # type: ignore[no-untyped-def]
            reads.append(atom)
            return exposure.rows_of(atom)

        sizes = exposure.partition.sizes()
        flag, flag_size = search._small._flag[cut.split], search._small._flag_size[cut.split]
        remembered_large = set(cut.split[(flag == 0) & (flag_size == sizes[cut.split])].tolist())
        small_of = search._small.classifier(exposure.partition, exposure.changed_atoms(), rows_of, parents)
        atoms = np.arange(exposure.atom_count, dtype=np.int64)
        expected = np.array([units.units(exposure.rows_of(int(a))) < search.k for a in atoms])
        assert (small_of(atoms) == expected).all()
        assert not remembered_large & set(reads)  # their outside rows were never read
        subtracted += len(remembered_large)
        checked += 1
        auditor.release(q)
        search.tidy(auditor)
    assert checked > 20
    assert subtracted > 20  # the subtraction was taken


@pytest.mark.parametrize("seed", range(6))
def test_verdicts_kept_through_releases_are_counted_as_afresh(seed: int) -> None:
    """Checked then released as the screen does (check, release, tidy): the verdicts and
    units remembered for committed atoms, which ``SmallAtoms.released`` carries through
    each cut by subtraction, are those of counting each atom's rows afresh."""
    rng = np.random.default_rng(7500 + seed)
    n = 300
    units = _Weighted(rng.integers(0, 3, size=n))
    search = GroupSearch(6, units)
    auditor = SpanAuditor(np.arange(n))
    carried = released = 0
    for _ in range(50):
        q = np.sort(rng.choice(n, size=int(rng.integers(3, 40)), replace=False))
        exposure = auditor.exposure(q)
        if exposure is None:
            continue
        told = rng.random() < 0.7  # else released unchecked (as a state rebuilt): flags go stale
        if told:
            search._checked = exposure.step  # as check() records it (its search is not needed here)
        auditor.release(q)
        search.tidy(auditor)
        released += 1
        small = search._small
        if told:
            assert (small._flag[exposure.step.cut.children] >= 0).all()  # its new parts remembered
        sizes = auditor.partition.sizes()
        for atom in range(auditor.partition.atom_count):
            if small._flag[atom] < 0 or small._flag_size[atom] != sizes[atom]:
                continue  # not remembered at this size: counted afresh when asked
            afresh = units.units(auditor.partition.rows(atom))
            assert small._flag_units[atom] == afresh
            assert bool(small._flag[atom]) == (afresh < search.k)
            carried += 1
    assert released > 20
    assert carried > 200
