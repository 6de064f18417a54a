"""The seed documents' worked examples of sensitivity rules (seed 000, seed 002 §2.4)."""

from __future__ import annotations

import pytest

from guard.rules import (
    CellContributions,
    Dominance,
    MinimumFrequency,
    PPercent,
    PriorPosterior,
    evaluate,
)

# (M3, P5) of the Castro magnitude table: five people, one earning 350 of 363
M3P5 = CellContributions.from_values([350, 4, 3, 3, 3])
# (M2, P3): the single person working as P3 in M2 earns 22 (external attack)
M2P3 = CellContributions.from_values([22])
# (M1, P1): two doctors earning 160 and 200 (internal attack: each learns the other)
M1P1 = CellContributions.from_values([160, 200])


def test_cells_are_built_from_per_respondent_values() -> None:
    assert CellContributions(total=363.0, contributors=5, top=(350.0, 4.0, 3.0, 3.0, 3.0)) == M3P5
    assert M1P1.top == (200.0, 160.0)


def test_m3p5_is_sensitive_under_1_50_dominance() -> None:
    # seed 000: "(1, 50) ... As 350/363 > 0.5: Cell is sensitive"
    verdict = Dominance(n=1, k=0.5)(M3P5)
    assert verdict.sensitive
    # tau-ARGUS level: (100/k%) * top - total = 350 / 0.5 - 363
    assert verdict.upper == pytest.approx(337.0)
    assert verdict.lower == pytest.approx(337.0)


def test_m3p5_seed_example_for_the_percent_rule() -> None:
    # seed 000 literally writes 363 - 350 - 4 < 0.5 * 363 (a p = 50 threshold applied
    # to the cell total); the arithmetic it states holds ...
    assert 363 - 350 - 4 < 0.5 * 363
    # ... and the p% rule as defined in seed 002 (threshold on x1, not on the total)
    # agrees at p = 50: 9 < 0.5 * 350
    verdict = PPercent(p=50)(M3P5)
    assert verdict.sensitive
    assert verdict.upper == pytest.approx(0.5 * 350 - 9)


def test_m3p5_is_sensitive_under_ten_percent_rule() -> None:
    verdict = PPercent(p=10)(M3P5)
    assert verdict.sensitive
    # the largest contributor could be estimated within 9 < 35 = 10 % of 350
    assert verdict.upper == pytest.approx(35 - 9)
    assert verdict.lower == pytest.approx(26.0)


def test_m2p3_single_respondent_is_sensitive_under_threshold_3() -> None:
    verdict = MinimumFrequency(threshold=3, fraction=0.1)(M2P3)
    assert verdict.sensitive
    assert verdict.upper == pytest.approx(2.2)
    # and under every magnitude rule: one respondent dominates their own cell
    assert PPercent(p=10)(M2P3).sensitive
    assert Dominance(n=1, k=0.6)(M2P3).sensitive


def test_m1p1_two_respondents_are_sensitive() -> None:
    assert MinimumFrequency(threshold=3)(M1P1).sensitive
    # each doctor subtracts their own salary from the total: the p% remainder is 0
    verdict = PPercent(p=10)(M1P1)
    assert verdict.sensitive
    assert verdict.upper == pytest.approx(20.0)


def test_m1p1_is_not_dominated_by_one_respondent() -> None:
    # 200 / 360 = 0.56: not above k = 0.6, so only threshold and p% flag it
    assert not Dominance(n=1, k=0.6)(M1P1).sensitive
    assert Dominance(n=2, k=0.9)(M1P1).sensitive


def test_seed_002_coalition_formula() -> None:
    # protected iff Σ_{i=c+2}^{N} x_i >= (p/100) x_1
    cell = CellContributions.from_values([100, 30, 20, 15])
    assert not PPercent(p=20, coalition=1)(cell).sensitive  # 20 + 15 = 35 >= 20
    two = PPercent(p=20, coalition=2)(cell)  # 15 < 20: x2 and x3 collude
    assert two.sensitive
    assert two.upper == pytest.approx(5.0)
    assert not PPercent(p=20, coalition=0)(cell).sensitive  # outsider: 65 >= 20


def test_seed_002_pq_rule() -> None:
    # protected iff (q/100) Σ_{i=c+2} x_i >= (p/100) x_1; with c = 1 it is the p% rule
    # with factor p/q: R = 35 < (20/50) * 100 = 40
    cell = CellContributions.from_values([100, 30, 20, 15])
    verdict = PriorPosterior(p=20, q=50)(cell)
    assert verdict.sensitive
    # (p x1 - q R) / 100 = (2000 - 1750) / 100
    assert verdict.upper == pytest.approx(2.5)
    assert not PriorPosterior(p=20, q=50)(CellContributions.from_values([100, 30, 20, 20])).sensitive


def test_castro_cells_under_one_rule_set() -> None:
    rules = (MinimumFrequency(3, fraction=0.1), PPercent(10), Dominance(1, 0.6))
    m3p5 = evaluate(rules, M3P5)
    assert m3p5.sensitive
    assert m3p5.rule == "p%(p=10) + dominance(n=1, k=0.6)"
    assert m3p5.upper == pytest.approx(350 / 0.6 - 363)
    m1p1 = evaluate(rules, M1P1)
    assert m1p1.rule == "threshold(t=3) + p%(p=10)"
    assert m1p1.upper == pytest.approx(36.0)  # max(0.1 * 360, 20)
    safe = evaluate(rules, CellContributions.from_values([100, 90, 80, 70]))
    assert not safe.sensitive
    assert safe.rule == ""
    assert (safe.upper, safe.lower) == (0.0, 0.0)
