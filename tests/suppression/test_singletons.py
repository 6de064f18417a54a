"""Singleton-aware suppression: the sole contributor of a withheld cell knows it, and
the pattern must hold against them (sdcTable's detectSingletons, tau-ARGUS's singleton
options). Every attack is also run against the pattern made without singleton
awareness, to show it is real; the oracle is an LP over the true table with the
insider's own cell published."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from guard.suppression import (
    TOTAL,
    Key,
    Method,
    Protection,
    ProtectionUnverified,
    SuppressionOptions,
    Table,
    failures,
    suppress,
)
from guard.suppression.singletons import insider_reach, relation_violations

EXACT = SuppressionOptions(perturbation=0.0)


def _grid(values: list[list[float]]) -> Table:
    cells: dict[Key, float] = {}
    rows, cols = len(values), len(values[0])
    for r, c in itertools.product(range(rows), range(cols)):
        cells[(r, c)] = values[r][c]
    for r in range(rows):
        cells[(r, TOTAL)] = sum(values[r])
    for c in range(cols):
        cells[(TOTAL, c)] = sum(values[r][c] for r in range(rows))
    cells[(TOTAL, TOTAL)] = sum(map(sum, values))
    return Table.from_cells(cells)


def _insider_failures(
    table: Table, hidden: frozenset[Key], insider: Key, requirements: dict[Key, Protection]
) -> list[object]:
    """What the insider (who knows ``insider``) pins among the other sensitive cells."""
    others = {k: v for k, v in requirements.items() if k != insider}
    return list(failures(table, hidden - {insider}, others))


# row 0: a singleton (50, one person) and a dominated cell (40) side by side
VALUES = [[50.0, 40.0, 300.0, 310.0], [200.0, 220.0, 240.0, 260.0], [210.0, 230.0, 250.0, 270.0]]
SINGLETON, OTHER = (0, 0), (0, 1)
REQUIREMENTS = {SINGLETON: Protection(10.0, 10.0), OTHER: Protection(8.0, 8.0)}


def test_the_insider_attack_is_real_without_singleton_awareness() -> None:
    table = _grid(VALUES)
    plain = suppress(table, REQUIREMENTS, options=EXACT)
    hidden = plain.primary | plain.secondary
    assert failures(table, hidden, REQUIREMENTS) == []  # the outsider learns nothing
    # the minimal pattern hides the two sensitive cells of row 0 and nothing else there
    assert {k for k in hidden if k[0] == 0} == {SINGLETON, OTHER}
    assert _insider_failures(table, hidden, SINGLETON, REQUIREMENTS) != []  # the insider pins OTHER


def test_the_pattern_holds_against_the_singleton_contributor() -> None:
    table = _grid(VALUES)
    result = suppress(table, REQUIREMENTS, options=EXACT, singletons=[SINGLETON])
    hidden = result.primary | result.secondary
    assert failures(table, hidden, REQUIREMENTS) == []
    assert _insider_failures(table, hidden, SINGLETON, REQUIREMENTS) == []
    assert len([k for k in hidden if k[0] == 0]) >= 3


def test_relation_rule_flags_a_row_with_one_other_withheld_cell() -> None:
    table = _grid(VALUES)
    hidden = {table.index(SINGLETON), table.index(OTHER)}
    broken = relation_violations(table, hidden, {table.index(SINGLETON)}, {table.index(OTHER)})
    assert [table.relations[r].total for r in broken] == [(0, TOTAL)]
    # a total and its member that are both singletons are one person: no violation
    assert relation_violations(table, hidden, {table.index(SINGLETON), table.index(OTHER)}, set()) == []


@pytest.mark.parametrize("seed", range(12))
def test_random_tables_hold_against_every_singleton(seed: int) -> None:
    rng = random.Random(seed)
    rows, cols = rng.randint(3, 5), rng.randint(3, 5)
    values = [[float(rng.randint(100, 400)) for _ in range(cols)] for _ in range(rows)]
    cells = [(r, c) for r in range(rows) for c in range(cols)]
    singletons = rng.sample(cells, rng.randint(1, 3))
    sensitive = set(singletons) | set(rng.sample(cells, 2))
    for r, c in singletons:
        values[r][c] = float(rng.randint(5, 60))
    table = _grid(values)
    requirements = {k: Protection(0.15 * table.value(k), 0.15 * table.value(k)) for k in sensitive}
    options = SuppressionOptions(perturbation=0.5)
    result = suppress(table, requirements, options=options, seed=seed, singletons=singletons)
    hidden = result.primary | result.secondary
    assert failures(table, hidden, requirements) == []
    for insider in singletons:
        assert _insider_failures(table, hidden, insider, requirements) == [], insider


def test_without_singletons_the_pattern_is_unchanged() -> None:
    table = _grid(VALUES)
    a = suppress(table, REQUIREMENTS, options=EXACT)
    b = suppress(table, REQUIREMENTS, options=EXACT, singletons=[])
    assert a == b
    assert np.isfinite(a.cost)


def test_an_insider_audit_over_its_budget_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail closed: a pattern whose insiders were not all audited is never returned."""
    import guard.suppression.singletons as singletons

    table = _grid(VALUES)
    monkeypatch.setattr(singletons, "MAX_INSIDER_AUDITS", 0)
    with pytest.raises(ProtectionUnverified, match="did not finish within its budget"):
        suppress(table, REQUIREMENTS, options=EXACT, singletons=[SINGLETON])
    monkeypatch.setattr(singletons, "MAX_INSIDER_AUDITS", 1)  # OTHER is the one cell to audit
    result = suppress(table, REQUIREMENTS, options=EXACT, singletons=[SINGLETON])
    assert _insider_failures(table, result.primary | result.secondary, SINGLETON, REQUIREMENTS) == []


def test_a_cell_holding_the_insiders_own_cell_is_protected_on_what_she_does_not_know() -> None:
    """Row 0 is one respondent's 50 and zeros: the row total (sensitive) cannot go below
    50 for her whatever is withheld, which tells her nothing (the others are not
    negative). Its lower level stops there; the upper one still holds against her, and
    before this the audit refused the table as unprotectable."""
    values = [[50.0, 0.0, 0.0, 0.0], [200.0, 220.0, 240.0, 260.0], [210.0, 230.0, 250.0, 270.0]]
    table = _grid(values)
    row_total = (0, TOTAL)
    requirements = {SINGLETON: Protection(10.0, 10.0), row_total: Protection(12.0, 12.0)}
    result = suppress(table, requirements, options=EXACT, singletons=[SINGLETON])
    hidden = result.primary | result.secondary
    assert failures(table, hidden, requirements) == []  # the outsider's intervals hold
    # the insider, knowing her 50: the row total still reaches 12 above its value
    (failure,) = failures(table, hidden - {SINGLETON}, {row_total: Protection(12.0, 12.0)})
    assert failure.high >= 50.0 + 12.0 - 1e-6
    assert failure.low == pytest.approx(50.0)  # the bound she already knew, nothing more


def _oracle_interval(
    values: np.ndarray, published: set[tuple[int, int]], cell: tuple[int, int]
) -> tuple[float, float]:
    """``cell``'s interval over the non-negative ``rows x cols`` grids with the margins
    of ``values`` wherever published (index ``rows`` / ``cols`` stands for a total),
    written here from scratch with scipy: the guard's relations and LP are not used."""
    from scipy.optimize import linprog

    rows, cols = values.shape
    index = {(r, c): r * cols + c for r in range(rows) for c in range(cols)}
    a_eq, b_eq = [], []
    for r, c in itertools.product(range(rows + 1), range(cols + 1)):
        if (r, c) not in published:
            continue
        row = np.zeros(rows * cols)
        for rr, cc in itertools.product(range(rows) if r == rows else [r], range(cols) if c == cols else [c]):
            row[index[(rr, cc)]] = 1.0
        a_eq.append(row)
        b_eq.append(float(row @ values.ravel()))
    target = np.zeros(rows * cols)
    r, c = cell
    for rr, cc in itertools.product(range(rows) if r == rows else [r], range(cols) if c == cols else [c]):
        target[index[(rr, cc)]] = 1.0
    ends = []
    for sign in (1.0, -1.0):
        res = linprog(
            sign * target,
            A_eq=np.array(a_eq) if a_eq else None,
            b_eq=b_eq or None,
            bounds=(0, None),
            method="highs",
        )
        assert res.status == 0
        ends.append(sign * res.fun)
    return ends[0], ends[1]


def test_insiders_proven_by_deviations_hold_against_an_independent_lp() -> None:
    """A heuristic pattern on a 9 x 9 grid with many single-contributor cells: most
    (insider, sensitive cell) pairs are proven by an attacker deviation that leaves
    every singleton where it is, so an LP budget far below the number of pairs is
    enough (the old audit solved every pair and refused here); and every pair still
    holds against an LP written in this test, with the insider's cell published."""
    import guard.suppression.singletons as singletons_module

    rng = np.random.default_rng(7)
    rows = cols = 9
    values = rng.integers(150, 400, size=(rows, cols)).astype(float)
    cells = [(r, c) for r in range(rows) for c in range(cols)]
    picked = rng.choice(len(cells), size=14, replace=False)
    singles = [cells[i] for i in picked[:8]]
    for r, c in singles:
        values[r, c] = float(rng.integers(5, 40))
    sensitive = [cells[i] for i in picked]
    table = _grid(values.tolist())
    requirements = {k: Protection(0.2 * table.value(k), 0.2 * table.value(k)) for k in sensitive}
    options = SuppressionOptions(method=Method.HEURISTIC, perturbation=0.5)
    pairs = len(singles) * (len(sensitive) - 1)
    budget = 20
    assert pairs > 4 * budget
    monkey = pytest.MonkeyPatch()
    monkey.setattr(singletons_module, "MAX_INSIDER_AUDITS", budget)
    try:
        result = suppress(table, requirements, options=options, seed=3, singletons=singles)
    finally:
        monkey.undo()
    hidden = result.primary | result.secondary
    published = {
        (rows if r is TOTAL else r, cols if c is TOTAL else c)
        for (r, c) in table.keys
        if (r, c) not in hidden
    }
    for insider in [None, *singles]:
        known = published | ({insider} if insider else set())
        for cell in sensitive:
            if cell == insider:
                continue
            low, high = _oracle_interval(values, known, cell)
            a = values[cell]
            level = requirements[cell]
            assert high >= a + level.upper - 1e-6, (insider, cell)
            # a total holding the insider's own cell: she learns nothing below it
            assert low <= a - level.lower + 1e-6, (insider, cell)


@pytest.mark.parametrize("seed", range(10))
def test_an_insiders_reach_is_the_walk_over_withheld_cells(seed: int) -> None:
    """The cells an insider's knowledge can move, against a walk written here: from her
    cells, through every relation of a withheld cell reached, to all its cells."""
    rng = random.Random(seed)
    values = [[float(rng.randint(1, 50)) for _ in range(5)] for _ in range(4)]
    table = _grid(values)
    hidden = {i for i in range(len(table)) if rng.random() < 0.5}
    reach = insider_reach(table, hidden)
    for start in rng.sample(sorted(hidden), min(5, len(hidden))):
        seen, stack = {start}, [start]
        while stack:
            cell = stack.pop()
            for cells in table.relation_cells:
                if cell in cells:
                    for other in cells:
                        if other not in seen:
                            seen.add(other)
                            if other in hidden:
                                stack.append(other)
        assert reach(frozenset({start})) == seen
