"""Strictness at equality, parameter validation, and the zero/negative policy."""

from __future__ import annotations

import pytest

from guard.rules import (
    CellContributions,
    Dominance,
    MinimumFrequency,
    PPercent,
    PriorPosterior,
    RuleVerdict,
    combine,
    depth,
    dominance,
    minimum_frequency,
    p_percent,
    prior_posterior,
)


def cell(*values: float) -> CellContributions:
    return CellContributions.from_values(values)


class TestThreshold:
    def test_exactly_t_contributors_is_safe(self) -> None:
        assert not minimum_frequency(cell(1, 2, 3), threshold=3).sensitive

    def test_one_below_t_is_sensitive(self) -> None:
        verdict = minimum_frequency(cell(10, 20), threshold=3, fraction=0.25)
        assert verdict == RuleVerdict("threshold(t=3)", True, upper=7.5, lower=7.5)

    def test_empty_cell_is_safe(self) -> None:
        assert not minimum_frequency(CellContributions(0.0, 0), threshold=3).sensitive

    def test_floor_sets_a_minimum_level(self) -> None:
        verdict = minimum_frequency(CellContributions(2.0, 2), threshold=5, fraction=0.1, floor=1.0)
        assert verdict.upper == verdict.lower == 1.0

    @pytest.mark.parametrize(
        ("threshold", "fraction", "floor", "message"),
        [
            (0, 0.1, 0.0, "threshold must be >= 1"),
            (3, -0.1, 0.0, "must be >= 0"),
            (3, 0.0, 0.0, "positive protection fraction or floor"),
        ],
    )
    def test_bad_parameters(self, threshold: int, fraction: float, floor: float, message: str) -> None:
        with pytest.raises(ValueError, match=message):
            MinimumFrequency(threshold, fraction, floor)


class TestDominance:
    def test_exactly_k_is_safe(self) -> None:
        assert not dominance(cell(50, 30, 20), n=1, k=0.5).sensitive

    def test_just_above_k_is_sensitive(self) -> None:
        verdict = dominance(cell(51, 30, 19), n=1, k=0.5)
        assert verdict.sensitive
        assert verdict.upper == pytest.approx(51 / 0.5 - 100)

    def test_two_largest(self) -> None:
        assert not dominance(cell(40, 30, 20, 10), n=2, k=0.7).sensitive  # 70 == 70
        assert dominance(cell(40, 31, 19, 10), n=2, k=0.7).sensitive

    def test_all_zero_cell_is_safe(self) -> None:
        assert not dominance(cell(0, 0, 0), n=1, k=0.5).sensitive

    def test_fewer_contributors_than_n(self) -> None:
        assert dominance(cell(5), n=2, k=0.9).sensitive

    @pytest.mark.parametrize(("n", "k"), [(0, 0.5), (1, 0.0), (1, 1.5), (2, -0.1)])
    def test_bad_parameters(self, n: int, k: float) -> None:
        with pytest.raises(ValueError, match="dominance rule needs"):
            Dominance(n, k)


class TestPercent:
    def test_remainder_equal_to_p_percent_is_safe(self) -> None:
        # total - x1 - x2 = 10 = (10/100) * 100
        assert not p_percent(cell(100, 50, 10), p=10).sensitive

    def test_remainder_just_below_is_sensitive(self) -> None:
        verdict = p_percent(cell(100, 50, 9), p=10)
        assert verdict.sensitive
        assert verdict.upper == pytest.approx(1.0)

    def test_pq_equality_is_safe(self) -> None:
        # q * R = 50 * 40 = 2000 = 20 * 100 = p * x1
        assert not prior_posterior(cell(100, 30, 25, 15), p=20, q=50).sensitive
        assert prior_posterior(cell(100, 30, 25, 14), p=20, q=50).sensitive

    def test_pq_with_q_100_is_p_percent(self) -> None:
        c = cell(100, 50, 9)
        pq, pp = prior_posterior(c, p=10, q=100), p_percent(c, p=10)
        assert (pq.sensitive, pq.upper, pq.lower) == (pp.sensitive, pp.upper, pp.lower)

    def test_single_respondent_is_sensitive(self) -> None:
        assert p_percent(cell(7), p=10).sensitive

    def test_all_zero_and_empty_cells_are_safe(self) -> None:
        assert not p_percent(cell(0, 0, 0), p=10).sensitive
        assert not p_percent(CellContributions(0.0, 0), p=10).sensitive

    @pytest.mark.parametrize(("p", "q", "c"), [(0, 100, 1), (20, 10, 1), (10, 101, 1), (10, 50, -1)])
    def test_bad_parameters(self, p: float, q: float, c: int) -> None:
        with pytest.raises(ValueError, match=r"p% / pq rules need|coalition size"):
            PriorPosterior(p, q, c)

    def test_p_must_be_below_100(self) -> None:
        with pytest.raises(ValueError, match="0 < p < q <= 100"):
            PPercent(100)


class TestContributions:
    def test_negative_contributions_use_absolute_values(self) -> None:
        c = cell(100, -95)
        assert c == CellContributions(total=195.0, contributors=2, top=(100.0, 95.0))
        # 100 > 0.5 * 195: the larger respondent still dominates the cell's magnitude
        assert dominance(c, n=1, k=0.5).sensitive

    def test_mixed_signs_can_be_safe(self) -> None:
        c = cell(100, -60, 50)  # magnitudes 100, 60, 50: R = 50 >= 10
        assert not p_percent(c, p=10).sensitive

    def test_signed_values_cannot_be_passed_directly(self) -> None:
        with pytest.raises(ValueError, match="magnitudes"):
            CellContributions(total=5.0, contributors=2, top=(100.0, -95.0))
        with pytest.raises(ValueError, match="sum of magnitudes"):
            CellContributions(total=5.0, contributors=2, top=(100.0,))

    def test_zero_contributors_still_count(self) -> None:
        c = cell(0, 0, 12)
        assert c.contributors == 3
        assert not minimum_frequency(c, threshold=3).sensitive

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"total": 10.0, "contributors": -1}, "contributors must be >= 0"),
            ({"total": 10.0, "contributors": 1, "top": (5.0, 5.0)}, "only 1"),
            ({"total": 10.0, "contributors": 2, "top": (3.0, 5.0)}, "descending"),
            ({"total": float("nan"), "contributors": 1}, "finite"),
        ],
    )
    def test_invalid_cells(self, kwargs: dict[str, object], message: str) -> None:
        with pytest.raises(ValueError, match=message):
            CellContributions(**kwargs)  # type: ignore[arg-type]

    def test_rule_needing_more_top_values_than_given(self) -> None:
        c = CellContributions.from_values([50, 40, 30, 20], depth=1)
        with pytest.raises(ValueError, match="compute top-2"):
            p_percent(c, p=10)

    def test_depth_limits_top(self) -> None:
        assert CellContributions.from_values([1, 5, 3], depth=2).top == (5.0, 3.0)


def test_rule_set_depth() -> None:
    assert depth((MinimumFrequency(3), Dominance(3, 0.8), PriorPosterior(10, 50, coalition=2))) == 3
    assert depth(()) == 0


def test_combine_takes_the_largest_level_per_direction() -> None:
    verdict = combine(
        [
            RuleVerdict("a", True, upper=5.0, lower=1.0),
            RuleVerdict("b", False),
            RuleVerdict("c", True, upper=2.0, lower=3.0),
        ]
    )
    assert verdict == RuleVerdict("a + c", True, upper=5.0, lower=3.0)
