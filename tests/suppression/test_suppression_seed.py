"""Seed 000's magnitude table: primaries from the rules, secondary suppression, LP audit."""

from __future__ import annotations

import pytest

from guard.rules import CellContributions, Dominance, MinimumFrequency, PPercent, RuleVerdict, evaluate
from guard.suppression import (
    TOTAL,
    Key,
    Method,
    SuppressionOptions,
    Table,
    Weight,
    audit,
    failures,
    suppress,
)

#: per-respondent salaries behind the three sensitive cells of the seed
RESPONDENTS: dict[Key, list[float]] = {
    ("M1", "P1"): [160, 200],
    ("M2", "P3"): [22],
    ("M3", "P5"): [350, 4, 3, 3, 3],
}
RULES = (MinimumFrequency(3, fraction=0.1), PPercent(10), Dominance(1, 0.6))


@pytest.fixture(scope="module")
def verdicts() -> dict[Key, RuleVerdict]:
    out = {key: evaluate(RULES, CellContributions.from_values(values)) for key, values in RESPONDENTS.items()}
    assert all(v.sensitive for v in out.values())
    return out


def test_protection_levels_from_the_rules(verdicts: dict[Key, RuleVerdict]) -> None:
    assert verdicts[("M1", "P1")].upper == pytest.approx(36.0)  # threshold: 10 % of 360
    assert verdicts[("M2", "P3")].upper == pytest.approx(22 / 0.6 - 22)  # dominance
    assert verdicts[("M3", "P5")].upper == pytest.approx(350 / 0.6 - 363)  # dominance


def test_primary_suppression_alone_is_not_enough(castro: Table, verdicts: dict[Key, RuleVerdict]) -> None:
    intervals = audit(castro, verdicts)
    for key in verdicts:
        assert intervals[key] == pytest.approx((castro.value(key), castro.value(key)))
    assert {f.key for f in failures(castro, verdicts, verdicts)} == set(verdicts)


@pytest.mark.parametrize("method", list(Method))
@pytest.mark.parametrize("weight", list(Weight))
def test_secondary_suppression_protects_every_primary(
    castro: Table, verdicts: dict[Key, RuleVerdict], method: Method, weight: Weight
) -> None:
    result = suppress(castro, verdicts, options=SuppressionOptions(method=method, weight=weight), seed=7)
    assert result.primary == frozenset(verdicts)
    assert result.secondary
    assert result.method is method
    # the LP audit, run independently of the solver's own certificates
    assert failures(castro, result.suppressed, verdicts) == []
    intervals = audit(castro, result.suppressed)
    for key, verdict in verdicts.items():
        low, high = intervals[key]
        a = castro.value(key)
        # none of the three can be recomputed from the released cells and totals
        assert low < a < high
        assert low <= a - min(verdict.lower, a) + 1e-6
        assert high >= a + verdict.upper - 1e-6


def test_optimal_count_pattern_is_minimal(castro: Table, verdicts: dict[Key, RuleVerdict]) -> None:
    options = SuppressionOptions(method=Method.OPTIMAL, weight=Weight.COUNT)
    result = suppress(castro, verdicts, options=options, seed=1)
    assert result.optimal
    # three primaries in three different rows and columns need a 7-cell pattern
    # (e.g. the seed's own secondaries (M1,P3), (M1,P5), (M2,P5) plus one more)
    assert len(result.suppressed) == 7
    assert result.cost == 7.0
    assert not any(TOTAL in key for key in result.secondary)
