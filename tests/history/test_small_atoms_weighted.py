"""Where units add up and are given per row id (``smallatoms.Weighted``), the small-atom
classifier counts every part of a cut in one pass (``part_sums``): the same counts as one
``units`` call per atom, so the same verdicts, remembered flags and group-search
decisions; a counter whose units do not add up keeps the per-atom count."""

from __future__ import annotations

import numpy as np
import pytest
from pyroaring import BitMap

from guard.history.atoms import AtomPartition
from guard.history.groups import GroupSearch
from guard.history.smallatoms import SmallAtoms, part_sums
from guard.history.span import SpanAuditor


class _Counted:
    """Units of auditor rows from each row's units as ids (one ``units`` call per set):
    ``disjoint`` when no unit lies in two rows."""

    def __init__(self, unit_ranges: list[range], disjoint: bool) -> None:
        self.ranges = unit_ranges
        self.disjoint = disjoint

    def unit_ids(self, rows: np.ndarray) -> BitMap:
        found = BitMap()
        for i in np.asarray(rows, dtype=np.int64).tolist():
            found.update(self.ranges[i])
        return found

    def units(self, rows: np.ndarray) -> int:
        return len(self.unit_ids(rows))


class _Weighted(_Counted):
    """The same units, also given per row id (as ``FinestCells.unit_weights``)."""

    def unit_weights(self) -> np.ndarray:
        return np.array([len(r) for r in self.ranges], dtype=np.int64)


def _disjoint_ranges(rng: np.random.Generator, n: int) -> list[range]:
    offsets = np.concatenate([[0], np.cumsum(rng.integers(0, 3, size=n))])  # empty rows too
    return [range(int(offsets[i]), int(offsets[i + 1])) for i in range(n)]


def _shared_ranges(rng: np.random.Generator, n: int) -> list[range]:
    """Units spanning several rows: the weights' sum over-counts them."""
    starts = rng.integers(0, n, size=n)
    return [range(int(s), int(s) + int(w)) for s, w in zip(starts, rng.integers(0, 4, size=n), strict=True)]


def _query(rng: np.random.Generator, n: int) -> np.ndarray:
    if rng.random() < 0.5:
        return np.sort(rng.choice(n, size=int(rng.integers(2, 40)), replace=False))
    start = int(rng.integers(0, n - 2))
    return np.arange(start, min(n, start + int(rng.integers(2, 60))))


@pytest.mark.parametrize("seed", range(8))
def test_every_part_counted_in_one_pass_is_counted_as_one_call_per_part(seed: int) -> None:
    """On random partitions: the rows of many atoms read together are each atom's rows,
    and the parts' weighted sums are the per-part ``units`` where they add up (and not
    where units are shared, which is why that counter keeps the per-atom count)."""
    rng = np.random.default_rng(8100 + seed)
    n = 250
    partition = AtomPartition.one_unit_per_row(n)
    disjoint = _Weighted(_disjoint_ranges(rng, n), disjoint=True)
    shared = _Weighted(_shared_ranges(rng, n), disjoint=False)
    differs = 0
    for _ in range(40):
        cut = partition.plan(_query(rng, n))
        parts = [cut.inside(i) for i in range(cut.split.size)]
        for counter in (disjoint, shared):
            summed = part_sums(counter.unit_weights(), cut.inside_rows, cut.inside_bounds)
            counted = np.array([counter.units(p) for p in parts], dtype=np.int64)
            if counter.disjoint:
                assert np.array_equal(summed, counted)
            else:
                differs += int((summed != counted).sum())
        partition.apply(cut)
        atoms = rng.integers(0, partition.atom_count, size=int(rng.integers(0, 30)))  # repeats too
        rows, bounds = partition.rows_of_atoms(atoms)
        assert bounds.size == atoms.size + 1
        for i, atom in enumerate(atoms.tolist()):
            assert np.array_equal(rows[bounds[i] : bounds[i + 1]], partition.rows(atom))
        sums = part_sums(disjoint.unit_weights(), rows, bounds)
        assert sums.tolist() == [disjoint.units(partition.rows(a)) for a in atoms.tolist()]
    assert differs > 0
    with pytest.raises(IndexError):
        partition.rows_of_atoms(np.array([partition.atom_count]))
    assert SmallAtoms(5, shared)._weights is None  # units shared: counted per atom
    assert SmallAtoms(5, disjoint, np.full(n, -1, dtype=np.int64))._weights is None  # flagged cells: read


@pytest.mark.parametrize("seed", range(8))
def test_the_weighted_classifier_decides_as_the_per_atom_one(seed: int) -> None:
    """Twin audits asked the same queries, checked then released as the screen does
    (some released unchecked, so remembered flags go stale): the one counting every part
    in one pass classifies every atom as counting its rows afresh, remembers the same
    flags and units, and decides as the one counting atom by atom, through every path
    (new parts, parts of atoms remembered small, outside parts by subtraction, cut atoms
    counted from their rows, atoms no cut changes)."""
    rng = np.random.default_rng(8200 + seed)
    n = 200
    ranges = _disjoint_ranges(rng, n)
    fast, slow = _Weighted(ranges, disjoint=True), _Counted(ranges, disjoint=True)
    searches = [GroupSearch(4, fast), GroupSearch(4, slow)]
    auditors = [SpanAuditor(np.arange(n)), SpanAuditor(np.arange(n))]
    assert searches[0]._small._weights is not None and searches[1]._small._weights is None
    checked = stale = 0
    for _ in range(35):
        q = _query(rng, n)
        exposures = [auditor.exposure(q) for auditor in auditors]
        if exposures[0] is None:
            assert exposures[1] is None
            continue
        told = rng.random() < 0.75  # else released unchecked (as a state rebuilt)
        verdicts = []
        for search, exposure in zip(searches, exposures, strict=True):
            assert exposure is not None
            cut = exposure.step.cut
            parents = dict(zip(cut.children.tolist(), cut.split.tolist(), strict=True))
            small = search._small
            flag, size = small._flag[cut.split], small._flag_size[cut.split]
            stale += int(((flag < 0) | ((flag == 0) & (size != exposure.partition.sizes()[cut.split]))).sum())
            small_of = small.classifier(
                exposure.partition, exposure.changed_atoms(), exposure.rows_of, parents, cut
            )
            atoms = np.arange(exposure.atom_count, dtype=np.int64)
            afresh = np.array([slow.units(exposure.rows_of(int(a))) < search.k for a in atoms])
            assert np.array_equal(small_of(atoms[::-1])[::-1], afresh)
            if told:
                verdicts.append(search.check(exposure).verdict)
        assert len(set(verdicts)) <= 1
        checked += told
        for search, auditor in zip(searches, auditors, strict=True):
            auditor.release(q)
            search.tidy(auditor)
        count = auditors[0].partition.atom_count
        assert count == auditors[1].partition.atom_count
        one, other = searches[0]._small, searches[1]._small
        for name in ("_flag", "_flag_size", "_flag_units"):
            assert np.array_equal(getattr(one, name)[:count], getattr(other, name)[:count]), name
        assert np.array_equal(auditors[0].basis_atoms(), auditors[1].basis_atoms())
    assert checked > 20
    assert stale > 5  # cut atoms counted from their rows, not only by subtraction
