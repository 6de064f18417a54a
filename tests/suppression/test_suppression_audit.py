"""The LP audit against seed 004's worked examples, and linked tables."""

from __future__ import annotations

import importlib
import itertools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np
import pytest
from scipy.optimize import linprog

from guard.suppression import (
    TOTAL,
    Key,
    Protection,
    ProtectionInfeasible,
    Table,
    audit,
    failures,
    linked_suppressed,
    suppress,
    union,
)

GridTable = Callable[[Sequence[Sequence[float]]], Table]


def test_seed_004_example_1(grid_table: GridTable) -> None:
    """Figure 2: (M1,P1) = 7 is sensitive (threshold 10); with (M1,P2), (M2,P1), (M2,P2)
    withheld, its feasibility interval is [0, 17]."""
    table = grid_table([[7, 11, 60], [10, 60, 11], [60, 12, 60]])
    suppressed = [(0, 0), (0, 1), (1, 0), (1, 1)]
    intervals = audit(table, suppressed)
    assert intervals[(0, 0)] == pytest.approx((0.0, 17.0))
    assert failures(table, suppressed, {(0, 0): Protection(8, 7)}) == []
    assert failures(table, suppressed, {(0, 0): Protection(11, 7)})[0].needed_high == 18


def test_seed_004_example_2(grid_table: GridTable) -> None:
    """Table 1: x1 = 14 + k, x2 = x3 = 9 - k, x4 = k for 0 <= k <= 9."""
    table = grid_table([[15, 15, 12, 10], [19, 20, 13, 3], [8, 8, 11, 14], [9, 3, 26, 6]])
    assert table.value((0, TOTAL)) == 52 and table.value((TOTAL, TOTAL)) == 192
    intervals = audit(table, [(1, 1), (1, 3), (3, 1), (3, 3)])
    expected = {(1, 1): (14, 23), (1, 3): (0, 9), (3, 1): (0, 9), (3, 3): (0, 9)}
    assert intervals.keys() == expected.keys()
    for key, interval in expected.items():
        assert intervals[key] == pytest.approx(interval)


def test_audit_of_unknown_cells_is_an_error(grid_table: GridTable) -> None:
    with pytest.raises(ValueError, match="is not a cell of this table"):
        audit(grid_table([[1, 2], [3, 4]]), [(5, 5)])


def test_unbounded_and_isolated_cells() -> None:
    table = Table.from_cells({("a",): 3, ("b",): 4, (TOTAL,): 7, ("c",): 5}, relations=[])
    assert audit(table, [("a",), ("c",)]) == {("a",): (0.0, math.inf), ("c",): (0.0, math.inf)}
    linked = Table.from_cells({("a",): 3, ("b",): 4, (TOTAL,): 7})
    intervals = audit(linked, [("a",), (TOTAL,)])
    assert intervals[("a",)] == pytest.approx((0.0, math.inf))
    assert intervals[(TOTAL,)] == pytest.approx((4.0, math.inf))
    # a published cell asked for gets its own value
    assert audit(linked, [], cells=[("b",)]) == {("b",): (4.0, 4.0)}


def _linked() -> tuple[Table, Table, dict[Key, Protection], dict[Key, Protection]]:
    """Two tables over (region, sector, quarter) sharing the marginal by region.

    Left: region x sector. Region r1 has a single business, in sector s1, so its region
    total equals that cell and must be withheld with it. Right: region x quarter,
    whose own sensitive cell is elsewhere, publishes r1's quarterly figures and so
    r1's total: joined, the left table's sensitive cell is disclosed.
    """
    left: dict[Key, float] = {}
    sectors: dict[str, dict[str, float]] = {
        "r1": {"s1": 50.0},
        "r2": {"s1": 40.0, "s2": 60.0, "s3": 30.0},
        "r3": {"s1": 35, "s2": 45, "s3": 70},
    }
    for region, row in sectors.items():
        for sector, value in row.items():
            left[(region, sector, TOTAL)] = value
        left[(region, TOTAL, TOTAL)] = sum(row.values())
    for sector in ("s1", "s2", "s3"):
        left[(TOTAL, sector, TOTAL)] = sum(row.get(sector, 0.0) for row in sectors.values())
    left[(TOTAL, TOTAL, TOTAL)] = sum(sum(row.values()) for row in sectors.values())

    right: dict[Key, float] = {}
    quarters: dict[str, dict[str, float]] = {
        "r1": {"q1": 20.0, "q2": 30.0},
        "r2": {"q1": 70.0, "q2": 60.0},
        "r3": {"q1": 4.0, "q2": 146.0},
    }
    for region, row in quarters.items():
        for quarter, value in row.items():
            right[(region, TOTAL, quarter)] = value
        right[(region, TOTAL, TOTAL)] = sum(row.values())
    for quarter in ("q1", "q2"):
        right[(TOTAL, TOTAL, quarter)] = sum(row[quarter] for row in quarters.values())
    right[(TOTAL, TOTAL, TOTAL)] = sum(sum(row.values()) for row in quarters.values())
    return (
        Table.from_cells(left),
        Table.from_cells(right),
        {("r1", "s1", TOTAL): Protection(10, 10)},
        {("r3", TOTAL, "q1"): Protection(2, 2)},
    )


def test_linked_tables_suppressed_separately_leak() -> None:
    left, right, left_req, right_req = _linked()
    left_hidden = suppress(left, left_req, seed=3).suppressed
    right_hidden = suppress(right, right_req, seed=3).suppressed
    # each release is safe on its own ...
    assert failures(left, left_hidden, left_req) == []
    assert failures(right, right_hidden, right_req) == []
    assert ("r1", TOTAL, TOTAL) in left_hidden
    assert ("r1", TOTAL, TOTAL) not in right_hidden
    # ... but the right table publishes the region total the left one withheld
    joint = union(left, right)
    hidden = linked_suppressed([(left, left_hidden), (right, right_hidden)])
    assert ("r1", TOTAL, TOTAL) not in hidden
    assert audit(joint, hidden)[("r1", "s1", TOTAL)] == pytest.approx((50.0, 50.0))
    assert [f.key for f in failures(joint, hidden, {**left_req, **right_req})] == [("r1", "s1", TOTAL)]


def test_suppressing_the_union_protects_both() -> None:
    left, right, left_req, right_req = _linked()
    joint = union(left, right)
    requirements = {**left_req, **right_req}
    hidden = suppress(joint, requirements, seed=3).suppressed
    assert failures(joint, hidden, requirements) == []
    # released table by table, every withheld shared cell is withheld in both
    releases = [(t, hidden & frozenset(t.keys)) for t in (left, right)]
    assert linked_suppressed(releases) == hidden
    assert failures(left, releases[0][1], left_req) == []
    assert failures(right, releases[1][1], right_req) == []


def test_an_earlier_release_that_pins_a_sensitive_cell_is_infeasible() -> None:
    """Once the right table has published r1's total, the left table's sensitive cell
    (equal to that total) cannot be protected any more: the guard must refuse."""
    left, right, left_req, right_req = _linked()
    right_hidden = suppress(right, right_req, seed=3).suppressed
    published = frozenset(right.keys) - right_hidden
    with pytest.raises(ProtectionInfeasible, match=r"\('r1', 's1', TOTAL\) cannot be given"):
        suppress(union(left, right), {**left_req, **right_req}, seed=3, kept=published, forced=right_hidden)


def test_a_later_table_respects_the_earlier_release() -> None:
    """The left table was published first: the right one keeps its released cells
    published, withholds what it withheld, and protects both tables' sensitive cells."""
    left, right, left_req, right_req = _linked()
    left_hidden = suppress(left, left_req, seed=3).suppressed
    joint = union(left, right)
    published = frozenset(left.keys) - left_hidden
    requirements = {**left_req, **right_req}
    result = suppress(joint, requirements, seed=3, kept=published, forced=left_hidden)
    assert not result.suppressed & published
    assert left_hidden <= result.suppressed
    # r1's quarters would add up to its total
    assert {("r1", TOTAL, "q1"), ("r1", TOTAL, "q2")} & result.suppressed
    assert failures(joint, result.suppressed, requirements) == []
    releases = [(left, left_hidden), (right, result.suppressed & frozenset(right.keys))]
    assert failures(joint, linked_suppressed(releases), requirements) == []


def test_a_sensitive_cell_marked_published_is_refused(grid_table: GridTable) -> None:
    table = grid_table([[1, 2], [3, 4]])
    with pytest.raises(ProtectionInfeasible, match="must be withheld but is marked as already published"):
        suppress(table, {(0, 0): Protection(1, 1)}, kept=[(0, 0)])


def _billions(seed: int) -> Table:
    """A 6 x 6 table of sums of incomes in the hundreds of millions, margins added in
    floating point (as an engine adds them)."""
    rng = np.random.default_rng(seed)
    values = np.round(rng.lognormal(18, 1.0, size=(6, 6)), 2).tolist()
    cells: dict[Key, float] = {}
    for r, c in itertools.product(range(6), range(6)):
        cells[(r, c)] = values[r][c]
    for r in range(6):
        cells[(r, TOTAL)] = sum(values[r])
    for c in range(6):
        cells[(TOTAL, c)] = sum(values[r][c] for r in range(6))
    cells[(TOTAL, TOTAL)] = sum(map(sum, values))
    return Table.from_cells(cells)


def _unscaled_lp_fails(table: Table, hidden: list[Key]) -> bool:
    """Whether scipy's LP, on the audit problem as written, calls the published values
    inconsistent (HiGHS's tolerance is absolute)."""
    a, _, _ = table.arrays
    columns = [table.index(k) for k in hidden]
    known = np.ones(len(table), dtype=bool)
    known[columns] = False
    rows = np.unique(table.matrix[:, columns].nonzero()[0])
    sub = table.matrix[rows]
    cost = np.zeros(len(columns))
    cost[0] = 1.0
    result = linprog(cost, A_eq=sub[:, columns], b_eq=-(sub[:, known] @ a[known]), bounds=(0, None))
    return bool(result.status == 2)


def test_sums_in_the_billions_are_audited_and_never_reported_wider() -> None:
    """Every inner cell withheld, the margins published: each cell's interval is its
    Fréchet bounds [max(0, row + column - total), min(row, column)], computed here in
    exact rationals. The audit neither fails on the margins' rounding residue (which an
    unscaled LP reads as infeasible: checked, for the case to be real) nor reports an
    interval wider than the exact one."""
    failing = 0
    for seed in range(6):
        table = _billions(seed)
        hidden = [(r, c) for r in range(6) for c in range(6)]
        failing += _unscaled_lp_fails(table, hidden)
        intervals = audit(table, hidden)
        total = Fraction(table.value((TOTAL, TOTAL)))
        for r, c in hidden:
            row, column = Fraction(table.value((r, TOTAL))), Fraction(table.value((TOTAL, c)))
            low, high = max(Fraction(0), row + column - total), min(row, column)
            got_low, got_high = intervals[(r, c)]
            assert Fraction(got_low) >= low - 1 and Fraction(got_high) <= high + 1, (seed, r, c)
            assert got_high - got_low >= 0.999 * float(high - low), (seed, r, c)
    assert failing > 0


@pytest.mark.parametrize("seed", range(8))
def test_intervals_by_component_equal_one_lp_over_every_withheld_cell(seed: int) -> None:
    """The audit solves each linked group of withheld cells apart; a group split too
    finely would fix a withheld cell of another group and narrow the interval. The
    oracle is one scipy LP over the whole 3-D table, every withheld cell free."""
    rng = np.random.default_rng(seed)
    values = rng.integers(1, 40, size=(3, 3, 2)).astype(float)
    cells: dict[Key, float] = {}
    for i, j, k in itertools.product(*([*range(n), TOTAL] for n in values.shape)):
        pick = tuple(slice(None) if x == TOTAL else x for x in (i, j, k))
        cells[(i, j, k)] = float(values[pick].sum())
    table = Table.from_cells(cells)
    hidden = sorted(i for i in range(len(table)) if rng.random() < 0.3)
    got = audit(table, [table.keys[i] for i in hidden])
    a, lb, ub = table.arrays
    dense = table.matrix.toarray()
    bounds = [(lb[i], ub[i]) if i in hidden else (a[i], a[i]) for i in range(len(table))]
    for i in hidden:
        cost = np.zeros(len(table))
        cost[i] = 1.0
        low = linprog(cost, A_eq=dense, b_eq=np.zeros(len(dense)), bounds=bounds, method="highs")
        high = linprog(-cost, A_eq=dense, b_eq=np.zeros(len(dense)), bounds=bounds, method="highs")
        assert got[table.keys[i]] == pytest.approx((low.fun, -high.fun), abs=1e-6)


def test_no_withheld_target_skips_the_components_and_nothing_else(monkeypatch: pytest.MonkeyPatch) -> None:
    """A linked answer without sensitive cells asks for no interval: its view's withheld
    cells are not grouped into components (the shortcut), while a sensitive cell that
    is published still fails, with its own value as its interval."""
    audit_module = importlib.import_module("guard.suppression.audit")

    def refused(*_: object) -> None:
        raise AssertionError("components built for an audit that asks for no withheld cell")

    table = Table.from_cells({("a",): 3, ("b",): 4, (TOTAL,): 7})
    withheld = [("a",), (TOTAL,)]
    monkeypatch.setattr(audit_module, "_components", refused)
    assert failures(table, withheld, {}) == []
    assert audit(table, withheld, cells=[("b",)]) == {("b",): (4.0, 4.0)}
    published = failures(table, withheld, {("b",): Protection(1, 1)})
    assert [(f.key, f.low, f.high) for f in published] == [(("b",), 4.0, 4.0)]


def test_a_withheld_target_is_audited_however_few_cells_are_withheld() -> None:
    """The shortcut is for audits that want no withheld cell; one that wants one must
    solve its LPs: here the sensitive cell is withheld alone, so its relation pins it and
    it must fail (a shortcut taken whenever one cell, or no relation's total, is
    withheld would pass it)."""
    table = Table.from_cells({("a",): 3, ("b",): 4, (TOTAL,): 7})
    alone = failures(table, [("a",)], {("a",): Protection(1, 1)})
    assert [(f.key, f.low, f.high) for f in alone] == [(("a",), pytest.approx(3.0), pytest.approx(3.0))]
    assert failures(table, [("a",), ("b",)], {("a",): Protection(1, 1)}) == []
