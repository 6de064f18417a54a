"""Invariants of the sensitivity rules, on integer contributions (exact in floats)."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import assume, given
from hypothesis import strategies as st

from guard.rules import (
    CellContributions,
    Dominance,
    MinimumFrequency,
    PPercent,
    PriorPosterior,
    evaluate,
)

contributions = st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=12)
percent = st.integers(min_value=1, max_value=99)
coalition = st.integers(min_value=0, max_value=3)
fraction = st.sampled_from([0.1, 0.25, 0.5, 0.6, 0.75, 0.9, 1.0])
#: many similar contributions: mostly safe cells
spread = st.lists(st.integers(min_value=1, max_value=100), min_size=3, max_size=20)


def cell(values: Sequence[float]) -> CellContributions:
    return CellContributions.from_values(values)


@given(contributions, percent, coalition, st.integers(min_value=-20, max_value=20))
def test_scaling_never_changes_percent_sensitivity(values: list[int], p: int, c: int, power: int) -> None:
    factor = 2.0**power  # exact in binary floating point
    rule = PPercent(p, coalition=c)
    before, after = rule(cell(values)), rule(cell([v * factor for v in values]))
    assert before.sensitive == after.sensitive
    assert after.upper == before.upper * factor


@given(
    contributions, st.integers(min_value=1, max_value=4), fraction, st.integers(min_value=-20, max_value=20)
)
def test_scaling_never_changes_dominance_sensitivity(values: list[int], n: int, k: float, power: int) -> None:
    factor = 2.0**power
    rule = Dominance(n, k)
    assert rule(cell(values)).sensitive == rule(cell([v * factor for v in values])).sensitive


@given(spread, percent, coalition, st.data())
def test_a_contributor_no_larger_than_x1_keeps_a_safe_cell_safe(
    values: list[int], p: int, c: int, data: st.DataObject
) -> None:
    q = data.draw(st.integers(min_value=p + 1, max_value=100))
    rule = PriorPosterior(p, q, coalition=c) if q < 100 else PPercent(p, coalition=c)
    assume(not rule(cell(values)).sensitive)
    extra = data.draw(st.integers(min_value=0, max_value=max(values)))
    assert not rule(cell([*values, extra])).sensitive


@given(spread, st.integers(min_value=1, max_value=4), fraction, st.data())
def test_a_contributor_no_larger_than_xn_keeps_a_dominance_safe_cell_safe(
    values: list[int], n: int, k: float, data: st.DataObject
) -> None:
    rule = Dominance(n, k)
    assume(not rule(cell(values)).sensitive)
    ranked = sorted(values, reverse=True)
    nth = ranked[n - 1] if len(ranked) >= n else 0
    extra = data.draw(st.integers(min_value=0, max_value=nth))
    assert not rule(cell([*values, extra])).sensitive


@given(contributions, percent, percent, coalition)
def test_percent_rule_is_monotone_in_p(values: list[int], p1: int, p2: int, c: int) -> None:
    low, high = sorted((p1, p2))
    if PPercent(low, coalition=c)(cell(values)).sensitive:
        assert PPercent(high, coalition=c)(cell(values)).sensitive


@given(contributions, percent, coalition)
def test_larger_coalitions_are_stricter(values: list[int], p: int, c: int) -> None:
    if PPercent(p, coalition=c)(cell(values)).sensitive:
        assert PPercent(p, coalition=c + 1)(cell(values)).sensitive


@given(contributions, st.integers(min_value=1, max_value=4), fraction, fraction)
def test_dominance_is_monotone_in_k(values: list[int], n: int, k1: float, k2: float) -> None:
    low, high = sorted((k1, k2))
    if Dominance(n, high)(cell(values)).sensitive:
        assert Dominance(n, low)(cell(values)).sensitive


@given(contributions, percent, coalition)
def test_percent_level_closes_the_gap_exactly(values: list[int], p: int, c: int) -> None:
    """Once the attacker's interval reaches ``upper`` above the total, the error of the
    coalition's estimate of x1 reaches p % of x1."""
    x = cell(values)
    verdict = PPercent(p, coalition=c)(x)
    top = x.largest(c + 1)
    rest = x.total - sum(top)
    if verdict.sensitive:
        assert verdict.upper > 0
        assert abs(rest + verdict.upper - p / 100 * top[0]) <= 1e-9 * max(1.0, top[0])
    else:
        assert verdict.upper == verdict.lower == 0


@given(contributions)
def test_verdicts_are_never_negative_and_zero_when_safe(values: list[int]) -> None:
    rules = (MinimumFrequency(3), PPercent(10), Dominance(2, 0.8), PriorPosterior(10, 60, coalition=2))
    for rule in rules:
        verdict = rule(cell(values))
        assert verdict.upper >= 0 and verdict.lower >= 0
        if not verdict.sensitive:
            assert verdict.upper == verdict.lower == 0
    combined = evaluate(rules, cell(values))
    assert combined.sensitive == any(rule(cell(values)).sensitive for rule in rules)


@given(st.lists(st.integers(min_value=-(10**6), max_value=10**6), min_size=1, max_size=12), percent)
def test_sign_of_contributions_never_matters(values: list[int], p: int) -> None:
    flipped = [-v for v in values]
    rule = PPercent(p)
    assert rule(cell(values)) == rule(cell(flipped))
