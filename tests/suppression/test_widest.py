"""Cells no answer holds that the earlier releases alone already narrow
(guard.suppression.widest): the answer is not refused for them, and it must not narrow
them further. Checked against intervals computed here by scipy, with every cell but the
published ones withheld (what the earlier releases alone leave) and with the pattern
chosen; a cell of the answer itself in the same position still refuses."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import linprog

from guard.suppression import TOTAL, Key, Protection, ProtectionInfeasible, Table, suppress
from guard.suppression.widest import requirements_within_widest

# row 0 is small: its total (published earlier) pins its cells to a narrow range
VALUES = [[4.0, 1.0, 0.5], [40.0, 35.0, 50.0], [45.0, 30.0, 38.0]]


def _grid() -> Table:
    cells: dict[Key, float] = {}
    for r, c in itertools.product(range(3), range(3)):
        cells[(r, c)] = VALUES[r][c]
    for r in range(3):
        cells[(r, TOTAL)] = sum(VALUES[r])
    for c in range(3):
        cells[(TOTAL, c)] = sum(VALUES[r][c] for r in range(3))
    cells[(TOTAL, TOTAL)] = sum(map(sum, VALUES))
    return Table.from_cells(cells)


MARGINS = [(r, TOTAL) for r in range(3)] + [(TOTAL, c) for c in range(3)] + [(TOTAL, TOTAL)]
INNER = [(r, c) for r in range(3) for c in range(3)]


def _interval(table: Table, hidden: set[Key], key: Key, known: set[Key] = frozenset()) -> tuple[float, float]:
    a, _, _ = table.arrays
    bounds = [
        (0.0, None) if k in hidden and k not in known else (a[i], a[i]) for i, k in enumerate(table.keys)
    ]
    cost = np.zeros(len(table))
    cost[table.index(key)] = 1.0
    dense = table.matrix.toarray()
    rhs = np.zeros(len(dense))
    low = linprog(cost, A_eq=dense, b_eq=rhs, bounds=bounds, method="highs")
    high = linprog(-cost, A_eq=dense, b_eq=rhs, bounds=bounds, method="highs")
    return float(low.fun), float(-high.fun)


def test_a_cell_the_earlier_releases_pin_does_not_refuse_and_is_not_narrowed_further() -> None:
    table = _grid()
    target = (0, 0)
    requirement = {target: Protection(2.0, 2.0)}  # row 0's total of 5.5 caps it at +1.5
    widest = _interval(table, set(INNER), target)
    assert widest[1] < VALUES[0][0] + 2.0  # the earlier margins alone narrow it
    with pytest.raises(ProtectionInfeasible):
        suppress(table, requirement, seed=1, kept=MARGINS, forced=[target])
    capped = requirements_within_widest(table, requirement, [target], MARGINS)
    assert 0 < capped[target].upper < 2.0 and capped[target].lower == pytest.approx(2.0)
    result = suppress(table, capped, seed=1, kept=MARGINS, forced=[target])
    low, high = _interval(table, set(result.suppressed), target)
    assert high >= widest[1] - 1e-5 and low <= widest[0] + 1e-5
    assert low <= VALUES[0][0] - 2.0 + 1e-6


def test_a_single_contributor_who_recovers_an_unasked_cell_from_earlier_releases() -> None:
    """Row 0 holds a singleton (0, 1) and the unasked sensitive (0, 0); (0, 2) and the
    row total were published earlier, so her own value gives her (0, 0) exactly,
    whatever is withheld now: no refusal for it. The same cell as a cell of the answer
    still refuses."""
    table = _grid()
    kept = [*MARGINS, (0, 2)]
    requirement = {(0, 0): Protection(1.0, 1.0)}
    assert _interval(table, set(INNER) - {(0, 2)}, (0, 0), known={(0, 1)}) == pytest.approx((4.0, 4.0))
    result = suppress(
        table,
        requirement,
        seed=1,
        kept=kept,
        forced=[(0, 0), (0, 1)],
        singletons=[(0, 1)],
        unasked=[(0, 0)],
    )
    assert {(0, 0), (0, 1)} <= result.suppressed
    with pytest.raises(ProtectionInfeasible):
        suppress(table, requirement, seed=1, kept=kept, forced=[(0, 0), (0, 1)], singletons=[(0, 1)])
