"""Exact intervals of sets over several atoms (``AtomIntervals.split``) and feasible points
carried from one sensitive-set check to the next (``carry.py``), against oracles outside
the guard: the row LP written here with scipy, and a dense check of every released SUM."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from pyroaring import BitMap

from guard.history.atomlp import AtomIntervals, atoms_of
from guard.history.carry import PointCarry, carried
from guard.history.sensitive import SensitiveSets, protects_sensitive_sets
from tests.history.lp_helpers import Cells, atom_intervals, lp_interval

Ids = npt.NDArray[np.int64]


@pytest.mark.parametrize("seed", range(25))
def test_a_set_over_several_atoms_gets_the_rowlp_interval(seed: int) -> None:
    found = atom_intervals(7000 + seed)
    if found is None:
        return
    bounds, counts, released, reach, slot, atom, intervals = found
    rng = np.random.default_rng(seed)
    for _ in range(4):
        members = reach[rng.random(reach.size) < 0.5]
        if not members.size:
            continue
        own, where = np.unique(atom[slot[members]], return_inverse=True)
        held = np.bincount(where.reshape(-1), weights=counts[members], minlength=own.size)
        low, high = intervals.exact(own, held.astype(np.float64))
        want_low, want_high = lp_interval(counts, released, members, bounds)
        assert low == pytest.approx(want_low, abs=1e-6) and high == pytest.approx(want_high, abs=1e-6)
    # the model is left as it was: an atom's interval is still the row LP's
    a = int(atom[0])
    low_atom, high_atom = intervals.interval(a)
    want = lp_interval(counts, released, reach[atom == a], bounds)
    assert (low_atom, high_atom) == pytest.approx(want, abs=1e-6)


def _history(
    seed: int,
) -> tuple[Ids, tuple[float, float], npt.NDArray[np.float64], list[tuple[BitMap, float]]]:
    """Row counts, bounds, true row totals and a sequence of SUMs over random subsets."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 60))
    bounds = (0.0, float(rng.choice([1.0, 60.0])))
    counts = rng.integers(1, 4, size=n).astype(np.int64)
    values = rng.uniform(bounds[0], bounds[1], size=n) * counts * (rng.random(n) < 0.7)
    sums: list[tuple[BitMap, float]] = [(BitMap(range(n)), float(values.sum()))]
    for _ in range(int(rng.integers(4, 10))):
        members = np.flatnonzero(rng.random(n) < rng.uniform(0.2, 0.8))
        if members.size:
            sums.append((BitMap(members.tolist()), float(values[members].sum())))
    return counts, bounds, values, sums


def _feasible(
    point: npt.NDArray[np.float64],
    atom_rows: list[Ids],
    counts: Ids,
    sums: list[tuple[BitMap, float]],
    bounds: tuple[float, float],
) -> bool:
    """Dense oracle: spread each atom's total evenly over its rows' boxes; every SUM holds."""
    row_value = np.zeros(counts.size)
    for total, rows in zip(point, atom_rows, strict=True):
        capacity = counts[rows].astype(np.float64)
        row_value[rows] = total * capacity / capacity.sum()
        if total < bounds[0] * capacity.sum() - 1e-6 or total > bounds[1] * capacity.sum() + 1e-6:
            return False
    return all(
        abs(row_value[list(members)].sum() - value) <= 1e-6 * max(1.0, abs(value)) for members, value in sums
    )


@pytest.mark.parametrize("seed", range(30))
def test_carried_points_satisfy_every_sum_of_the_next_check(seed: int) -> None:
    counts, bounds, _values, sums = _history(8000 + seed)
    size = counts.size
    carry = PointCarry()
    lifted_any = 0
    for step in range(1, len(sums)):
        released = [members for members, _ in sums[:step]]
        values: list[float | None] = [value for _, value in sums[:step]]
        candidate = np.asarray(list(sums[step][0]), dtype=np.int64)
        after = sums[: step + 1]
        reach = np.arange(size, dtype=np.int64)
        slot, atom = atoms_of(after, reach, size)
        positions = list(range(step))
        lifted = carry.lift(
            released, values, positions, candidate, sums[step][1], reach, atom, counts, bounds
        )
        atom_rows = [reach[atom == a] for a in range(int(atom.max()) + 1)]
        if lifted is not None:
            for point in lifted:
                lifted_any += 1
                assert _feasible(point, atom_rows, counts, after, bounds)
        intervals = AtomIntervals(after, slot, atom, counts.astype(np.float64), bounds)
        for a in range(min(4, len(atom_rows))):
            intervals.interval(a)
        carry.keep(
            carried(atom, reach, size, intervals.points(), positions, candidate, sums[step][1], len(released))
        )
    assert lifted_any > 0


def test_a_wrong_point_is_never_taken() -> None:
    counts, bounds, _values, sums = _history(8100)
    reach = np.arange(counts.size, dtype=np.int64)
    slot, atom = atoms_of(sums, reach, counts.size)
    intervals = AtomIntervals(sums, slot, atom, counts.astype(np.float64), bounds)
    intervals.interval(0)
    good = intervals.points().copy()
    fresh = AtomIntervals(sums, slot, atom, counts.astype(np.float64), bounds)
    assert fresh.add_points(good) == len(good)
    broken = good.copy()
    broken[:, 0] += 1.0  # moves one atom: some SUM no longer holds
    assert fresh.add_points(broken) == 0
    outside = good.copy()
    outside[:, 0] = -1.0 - bounds[1] * counts.sum()  # below every box
    assert fresh.add_points(outside) == 0


def _sensitive(rng: np.random.Generator, counts: Ids, values: npt.NDArray[np.float64]) -> SensitiveSets:
    flagged = np.flatnonzero(rng.random(counts.size) < 0.6)
    of = np.full(counts.size, -1, dtype=np.int64)
    of[flagged] = np.arange(flagged.size)
    return SensitiveSets(
        of,
        tuple(np.array([i], dtype=np.int64) for i in flagged),
        tuple(float(values[i]) for i in flagged),
        tuple((0.2 * float(values[i]), 0.2 * float(values[i])) for i in flagged),
        values.astype(np.float64),
    )


@pytest.mark.parametrize("seed", range(25))
def test_decisions_with_carried_points_are_the_decisions_without(seed: int) -> None:
    """Carried points only save solves: on histories inside every budget, each candidate
    gets the same verdict with and without them (points prove only by feasibility)."""
    counts, bounds, values, sums = _history(8200 + seed)
    sets = _sensitive(np.random.default_rng(seed), counts, values)
    cells = Cells(counts)
    states = {False: ([], []), True: ([], [])}
    carries = {False: None, True: PointCarry()}
    for members, value in sums:
        candidate = np.asarray(list(members), dtype=np.int64)
        verdicts = {}
        for with_carry in (False, True):
            released, known = states[with_carry]
            verdicts[with_carry] = protects_sensitive_sets(
                sets, cells, released, known, candidate, value, bounds, carries[with_carry]
            )
            if verdicts[with_carry]:
                released.append(members)
                known.append(value)
        assert verdicts[False] == verdicts[True]


def _oracle_verdict(
    sets: SensitiveSets,
    counts: Ids,
    released: list[tuple[BitMap, float]],
    candidate: tuple[BitMap, float],
    bounds: tuple[float, float],
) -> bool:
    """The check's definition, by the scipy row LP per flagged set: every set reaches its
    targets with the candidate released, or its interval does not move."""
    from guard.history.sensitive import interval_targets

    cells = Cells(counts)
    after = [*released, candidate]
    for number in range(len(sets.members)):
        members = sets.members[number]
        low, high = lp_interval(counts, after, members, bounds)
        need_low, need_high = interval_targets(sets, cells, number, bounds)
        slack = 1e-6 * max(1.0, abs(sets.totals[number]))
        if high >= need_high - slack and low <= need_low + slack:
            continue
        before = lp_interval(counts, released, members, bounds) if released else None
        if before is None or abs(before[0] - low) > slack or abs(before[1] - high) > slack:
            return False
    return True


@pytest.mark.parametrize("seed", range(4))
def test_many_flagged_cells_alone_in_their_atoms_get_the_oracle_verdict(seed: int) -> None:
    """A table where nearly every flagged set spans atoms that hold nothing else (the true
    values' certificate proves none of them): 60 sets need an exact interval each, where
    the old row-LP stage withheld past 32. The guard's verdict is the row LP's, set by
    set."""
    rng = np.random.default_rng(9000 + seed)
    n = 120
    bounds = (0.0, 60.0)
    counts = np.ones(n, dtype=np.int64)
    values = rng.uniform(0.0, 60.0, size=n) * (rng.random(n) < 0.7)
    # flagged sets of two rows each, which the released sums put in different atoms
    of = np.arange(n, dtype=np.int64) // 2
    pairs = [np.array([i, i + 1], dtype=np.int64) for i in range(0, n, 2)]
    sets = SensitiveSets(
        of,
        tuple(pairs),
        tuple(float(values[pair].sum()) for pair in pairs),
        tuple((0.6 * float(values[pair].sum()), 0.6 * float(values[pair].sum())) for pair in pairs),
        values,
    )
    sums: list[tuple[BitMap, float]] = []
    for _ in range(40):
        members = np.flatnonzero(rng.random(n) < 0.5)
        sums.append((BitMap(members.tolist()), float(values[members].sum())))
    candidate = np.flatnonzero(rng.random(n) < 0.5)
    value = float(values[candidate].sum())
    released, known = [m for m, _ in sums], [v for _, v in sums]
    carry = PointCarry()
    verdict = protects_sensitive_sets(sets, Cells(counts), released, known, candidate, value, bounds, carry)
    assert verdict == _oracle_verdict(sets, counts, sums, (BitMap(candidate.tolist()), value), bounds)
    # a candidate that states one flagged pair's total: withheld, as the oracle says
    pair = sets.members[int(rng.integers(0, n // 2))]
    pinned = float(values[pair].sum())
    verdict = protects_sensitive_sets(sets, Cells(counts), released, known, pair, pinned, bounds, carry)
    assert verdict == _oracle_verdict(sets, counts, sums, (BitMap(pair.tolist()), pinned), bounds)


@pytest.mark.parametrize("seed", range(20))
def test_points_at_both_ends_of_the_candidate_carry_as_their_mix(seed: int) -> None:
    """The last check's points are the candidate's own minimum and maximum under the
    earlier SUMs: neither satisfies the candidate's equation (unless the bounds pin it),
    but a mix of the two does, and is carried (feasible by the dense oracle)."""
    counts, bounds, _values, sums = _history(8300 + seed)
    size = counts.size
    reach = np.arange(size, dtype=np.int64)
    earlier, (members, value) = sums[:-1], sums[-1]
    slot, atom = atoms_of(earlier, reach, size)
    intervals = AtomIntervals(earlier, slot, atom, counts.astype(np.float64), bounds)
    candidate = np.asarray(list(members), dtype=np.int64)
    own, where = np.unique(atom[slot[candidate]], return_inverse=True)
    held = np.bincount(where.reshape(-1), weights=counts[candidate], minlength=own.size)
    low, high = intervals.exact(own, held.astype(np.float64))
    assert low is not None and high is not None
    if high - low < 1e-3 * max(1.0, abs(value)):
        return  # the earlier SUMs pin the candidate: nothing to mix
    ends = intervals.points()[-2:]  # the split's minimum and maximum
    positions = list(range(len(earlier)))
    carry = PointCarry()
    carry.keep(carried(atom, reach, size, ends, positions, candidate, value, len(earlier)))
    released = [m for m, _ in earlier]
    known: list[float | None] = [v for _, v in earlier]
    new_slot, new_atom = atoms_of(sums, reach, size)
    lifted = carry.lift(released, known, positions, candidate, value, reach, new_atom, counts, bounds)
    assert lifted is not None and len(lifted) >= 1
    atom_rows = [reach[new_atom == a] for a in range(int(new_atom.max()) + 1)]
    for point in lifted:
        assert _feasible(point, atom_rows, counts, sums, bounds)
    model = AtomIntervals(sums, new_slot, new_atom, counts.astype(np.float64), bounds)
    assert model.add_points(lifted) == len(lifted)
