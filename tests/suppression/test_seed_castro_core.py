"""The pure suppression core on the seed magnitude table (seed 000, Castro 2012).

Groundwork for issue 3: the rules and the CSP solver are not wired into the query path
yet; these tests pin their behaviour on the seed example.
"""

from __future__ import annotations

import pytest

from guard.rules import CellContributions, Dominance, MinimumFrequency, PPercent, evaluate
from guard.suppression import TOTAL, Table, audit, failures, suppress

VALUES = {
    "M1": [360, 450, 720, 400, 360],
    "M2": [1440, 540, 22, 570, 320],
    "M3": [722, 1178, 375, 800, 363],
}
PRIMARY = {
    ("M1", "P1"): CellContributions(360, 2, (200, 160)),
    ("M2", "P3"): CellContributions(22, 1, (22,)),
    ("M3", "P5"): CellContributions(363, 5, (350, 4, 3)),
}


def _table() -> Table:
    cells: dict[tuple[object, ...], float] = {}
    for m, row in VALUES.items():
        for j, v in enumerate(row):
            cells[(m, f"P{j + 1}")] = v
        cells[(m, TOTAL)] = sum(row)
    for j in range(5):
        cells[(TOTAL, f"P{j + 1}")] = sum(VALUES[m][j] for m in VALUES)
    cells[(TOTAL, TOTAL)] = sum(sum(row) for row in VALUES.values())
    return Table.from_cells(cells)


def test_seed_primaries() -> None:
    rules = (MinimumFrequency(3), Dominance(1, 0.5))
    assert {k for k, c in PRIMARY.items() if evaluate(rules, c).sensitive} == set(PRIMARY)
    assert evaluate((PPercent(10),), PRIMARY[("M3", "P5")]).sensitive  # 363-350-4 < 0.1*350


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_secondary_suppression_protects_every_primary(seed: int) -> None:
    table = _table()
    requirements = {k: evaluate((MinimumFrequency(3), Dominance(1, 0.5)), c) for k, c in PRIMARY.items()}
    result = suppress(table, requirements, seed=seed)
    hidden = result.suppressed
    assert set(PRIMARY) <= hidden and len(hidden) > len(PRIMARY)
    assert failures(table, hidden, requirements) == []
    intervals = audit(table, hidden)
    for key, verdict in requirements.items():
        low, high = intervals[key]
        value = table.value(key)
        assert low <= value - verdict.lower + 1e-6 and high >= value + verdict.upper - 1e-6
    # no total is suppressed by the optimum here, and nothing is recomputable exactly
    assert all(high - low > 0 for low, high in intervals.values())


def test_primary_suppression_alone_is_recomputable() -> None:
    table = _table()
    requirements = {k: evaluate((MinimumFrequency(3),), c) for k, c in PRIMARY.items() if c.contributors < 3}
    intervals = audit(table, frozenset(requirements))
    assert intervals[("M2", "P3")] == pytest.approx((22.0, 22.0))  # row total minus the others
    assert failures(table, frozenset(requirements), requirements)
