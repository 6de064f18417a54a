"""Requirements proven at the least pattern (guard.suppression.standing): what is proven
holds by an independent LP with every other cell published; what a published cell pins
is not proven; a deviation moving an insider's cell does not prove against her."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from guard.suppression import TOTAL, Protection, Table
from guard.suppression.standing import prove_standing

# a 3 x 3 table with both margins and its total; the margins and total are published
VALUES = [[20.0, 4.0, 30.0], [25.0, 35.0, 15.0], [18.0, 22.0, 40.0]]


def _table() -> Table:
    cells: dict[tuple[object, object], float] = {}
    for i, row in enumerate(VALUES):
        for j, value in enumerate(row):
            cells[(i, j)] = value
        cells[(i, TOTAL)] = sum(row)
    for j in range(3):
        cells[(TOTAL, j)] = sum(row[j] for row in VALUES)
    cells[(TOTAL, TOTAL)] = sum(map(sum, VALUES))
    return Table.from_cells(cells)


def _interval(
    table: Table, hidden: set[tuple[object, object]], key: tuple[object, object]
) -> tuple[float, float]:
    """min and max of ``key``: x >= 0, every relation, the published cells fixed."""
    a, _, _ = table.arrays
    n = len(table)
    bounds = [(0.0, None) if table.keys[i] in hidden else (a[i], a[i]) for i in range(n)]
    c = np.zeros(n)
    c[table.index(key)] = 1.0
    matrix = table.matrix.toarray()
    low = linprog(c, A_eq=matrix, b_eq=np.zeros(len(matrix)), bounds=bounds, method="highs")
    high = linprog(-c, A_eq=matrix, b_eq=np.zeros(len(matrix)), bounds=bounds, method="highs")
    return low.fun, (np.inf if high.status == 3 else -high.fun)


def test_proven_requirements_hold_by_an_independent_lp() -> None:
    table = _table()
    inner = {(i, j) for i in range(3) for j in range(3)}
    requirements = {k: Protection(upper=3.0, lower=3.0) for k in [(0, 1), (1, 1), (2, 0)]}
    standing = prove_standing(table, requirements, inner)
    assert standing.proven == set(requirements)
    for key, level in requirements.items():
        low, high = _interval(table, inner, key)
        assert high >= table.value(key) + level.upper - 1e-6
        assert low <= table.value(key) - level.lower + 1e-6


def test_a_cell_its_published_neighbours_pin_is_not_proven() -> None:
    table = _table()
    # only (0, 1) and (1, 1) withheld besides the published rest of column 1 and row 0:
    # (0, 1) moves only against (1, 1), and row 0 fixes it
    hidden = {(0, 1), (1, 1)}
    standing = prove_standing(table, {(0, 1): Protection(2.0, 2.0)}, hidden)
    assert standing.proven == frozenset()
    assert _interval(table, hidden, (0, 1)) == (4.0, 4.0)


def test_a_proof_that_moves_an_insiders_cell_does_not_count_against_her() -> None:
    table = _table()
    # a 2 x 2 cycle (0,0) (0,1) (1,0) (1,1) is the only way (0, 1) moves; (1, 0) has one
    # contributor, who knows it and so pins the cycle: (0, 1) is not proven against her
    hidden = {(0, 0), (0, 1), (1, 0), (1, 1)}
    requirement = {(0, 1): Protection(2.0, 2.0)}
    assert prove_standing(table, requirement, hidden).proven == {(0, 1)}
    assert prove_standing(table, requirement, hidden, singletons=[(1, 0)]).proven == frozenset()
