"""The feasible-point certificate of sensitive sets (``sensitive.certified_sets``) against
an independent oracle: the LP interval of the set over the released SUMs and the declared
bounds. A set the certificate passes must have an LP interval reaching its targets; and
on tables where nearly every finest cell is flagged, most sets pass without an LP."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from pyroaring import BitMap

from guard.history.sensitive import SensitiveSets, certified_sets, interval_targets
from tests.history.lp_helpers import Cells, atom_intervals, lp_interval, released_sums

Ids = npt.NDArray[np.int64]


@pytest.mark.parametrize("seed", range(40))
def test_a_certified_set_has_an_lp_interval_reaching_its_targets(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(6, 30))
    bounds = (0.0, float(rng.choice([1.0, 60.0, 1000.0])))
    counts = rng.integers(1, 5, size=n).astype(np.int64)
    # values inside the box, often at a bound (zero-inflated measures)
    per_row = rng.uniform(bounds[0], bounds[1], size=n) * (rng.random(n) < 0.6)
    values = per_row * counts
    cells = Cells(counts)
    released: list[tuple[BitMap, float]] = []
    for _ in range(int(rng.integers(1, 6))):
        members = np.flatnonzero(rng.random(n) < rng.uniform(0.2, 0.9))
        if members.size:
            released.append((BitMap(members.tolist()), float(values[members].sum())))
    if not released:
        return
    flagged = np.flatnonzero(rng.random(n) < 0.5)
    of = np.full(n, -1, dtype=np.int64)
    of[flagged] = np.arange(flagged.size)
    levels = tuple(
        (float(rng.uniform(0, 0.5) * values[i]), float(rng.uniform(0, 0.5) * max(values[i], 1.0)))
        for i in flagged
    )
    sets = SensitiveSets(
        of,
        tuple(np.array([i], dtype=np.int64) for i in flagged),
        tuple(float(values[i]) for i in flagged),
        levels,
        values.astype(np.float64),
    )
    reach = np.array(sorted(BitMap.union(*(m for m, _ in released))), dtype=np.int64)
    near = np.unique(of[reach])
    near = near[near >= 0]
    if not near.size:
        return
    certified = certified_sets(sets, cells, released, reach, near, bounds)
    for number, ok in zip(near.tolist(), certified.tolist(), strict=True):
        if not ok:
            continue
        low, high = lp_interval(counts, released, sets.members[number], bounds)
        need_low, need_high = interval_targets(sets, cells, number, bounds)
        slack = 1e-6 * max(1.0, abs(sets.totals[number]))
        assert high >= need_high - slack and low <= need_low + slack, (number, low, high, need_low, need_high)


def test_one_release_over_many_flagged_cells_is_certified_without_lp() -> None:
    """A wide SUM over 500 one-row cells, every one flagged: the certificate alone clears
    them (the LP path would refuse over MAX_INTERVAL_SETS sets)."""
    rng = np.random.default_rng(7)
    n = 500
    counts = np.ones(n, dtype=np.int64)
    values = rng.uniform(0, 60, size=n) * (rng.random(n) < 0.3)
    of = np.arange(n, dtype=np.int64)
    sets = SensitiveSets(
        of,
        tuple(np.array([i], dtype=np.int64) for i in range(n)),
        tuple(float(v) for v in values),
        tuple((0.1 * float(v), 0.1 * float(v)) for v in values),
        values,
    )
    released = [(BitMap(range(n)), float(values.sum()))]
    certified = certified_sets(sets, Cells(counts), released, np.arange(n, dtype=np.int64), of, (0.0, 60.0))
    assert certified.all()


def test_unknown_true_values_are_left_to_the_lp() -> None:
    counts = np.ones(4, dtype=np.int64)
    values = np.array([1.0, np.nan, 3.0, 4.0])
    sets = SensitiveSets(
        np.arange(4, dtype=np.int64),
        tuple(np.array([i], dtype=np.int64) for i in range(4)),
        (1.0, 2.0, 3.0, 4.0),
        ((0.1, 0.1),) * 4,
        values,
    )
    released = [(BitMap([0, 1]), 3.0), (BitMap([2, 3]), 7.0)]
    certified = certified_sets(
        sets, Cells(counts), released, np.arange(4, dtype=np.int64), np.arange(4), (0.0, 10.0)
    )
    assert certified.tolist() == [False, False, True, True]


@pytest.mark.parametrize("seed", range(30))
def test_atom_intervals_equal_the_row_lp(seed: int) -> None:
    """The interval of a cell from its atom's LP (``atomlp.py``) is the row LP's, exactly."""
    found = atom_intervals(1000 + seed)
    if found is None:
        return
    bounds, counts, released, reach, slot, atom, intervals = found
    for row in reach.tolist():
        a = int(atom[slot[row]])
        low_atom, high_atom = intervals.interval(a)
        assert low_atom is not None and high_atom is not None
        rest = intervals.rows(a) - counts[row]
        high = min(bounds[1] * counts[row], high_atom - bounds[0] * rest)
        low = max(bounds[0] * counts[row], low_atom - bounds[1] * rest)
        want_low, want_high = lp_interval(counts, released, np.array([row]), bounds)
        assert low == pytest.approx(want_low, abs=1e-6) and high == pytest.approx(want_high, abs=1e-6)


@pytest.mark.parametrize("seed", range(30))
def test_points_seen_lie_inside_the_rowlp_interval(seed: int) -> None:
    """The totals an atom takes at the feasible points the solves found (which prove
    sets without an LP of their own) never leave the atom's exact interval, computed
    here by the row LP: they are values the released SUMs allow; nor does what a set
    over several atoms reaches at those points. And a spread over every atom reaches an
    end of each atom's interval for some atoms at least."""
    found = atom_intervals(2000 + seed)
    if found is None:
        return
    bounds, counts, released, reach, _slot, atom, intervals = found
    every = np.unique(atom)
    intervals.spread(every)
    reached = 0
    for a in every.tolist():
        rows = reach[atom == a]
        want_low, want_high = lp_interval(counts, released, rows, bounds)
        seen_low, seen_high = intervals.reach(np.array([a]), np.array([intervals.rows(a)]))
        assert want_low - 1e-6 <= seen_low <= seen_high <= want_high + 1e-6
        reached += seen_low == pytest.approx(want_low, abs=1e-6) or seen_high == pytest.approx(
            want_high, abs=1e-6
        )
    assert reached >= 1


@pytest.mark.parametrize("seed", range(20))
def test_the_row_lp_equals_an_independent_lp(seed: int) -> None:
    """``intervals.feasible_interval`` (one highspy model, both senses) gives the
    interval of the LP written in this test with scipy."""
    from guard.history.intervals import feasible_interval

    rng = np.random.default_rng(3000 + seed)
    n, bounds, counts, released = released_sums(rng)
    if not released:
        return
    target = np.flatnonzero(rng.random(n) < 0.3)
    if not target.size:
        target = np.array([0], dtype=np.int64)
    low, high = feasible_interval(Cells(counts), released, target.astype(np.int64), bounds)
    want_low, want_high = lp_interval(counts, released, target, bounds)
    assert low == pytest.approx(want_low, abs=1e-6) and high == pytest.approx(want_high, abs=1e-6)
