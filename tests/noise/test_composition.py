"""Exact ε parsing, splitting and per-query composition."""

from __future__ import annotations

from fractions import Fraction

import pytest

from guard.noise.composition import QueryAccountant, format_epsilon, split_sequential
from guard.policy.epsilon import as_epsilon


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (0.1, Fraction(1, 10)),
        ("0.1", Fraction(1, 10)),
        (1, Fraction(1)),
        (Fraction(1, 3), Fraction(1, 3)),
        (0.3829, Fraction(3829, 10000)),
        ("1e-3", Fraction(1, 1000)),
    ],
)
def test_as_epsilon_reads_the_decimal_the_steward_wrote(given: float | str, expected: Fraction) -> None:
    assert as_epsilon(given) == expected


def test_ten_tenths_make_exactly_one() -> None:
    assert sum((as_epsilon(0.1) for _ in range(10)), Fraction(0)) == 1


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        (0, ValueError, "must be > 0"),
        (-0.5, ValueError, "must be > 0"),
        (float("nan"), ValueError, "must be finite"),
        (float("inf"), ValueError, "must be finite"),
        ("lots", ValueError, "decimal number"),
        (True, TypeError, "not bool"),
        (None, TypeError, "not NoneType"),
    ],
)
def test_as_epsilon_rejects(bad: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        as_epsilon(bad)  # type: ignore[arg-type]


def test_format_epsilon() -> None:
    assert format_epsilon(Fraction(1, 3)) == "0.333333"
    assert format_epsilon(Fraction(10)) == "10"


def test_split_sequential_is_exact() -> None:
    thirds = split_sequential(1, 3)
    assert thirds == (Fraction(1, 3),) * 3
    assert sum(thirds) == 1
    weighted = split_sequential("0.9", [1, 2])
    assert weighted == (Fraction(3, 10), Fraction(6, 10))


@pytest.mark.parametrize("weights", [0, [], [1, 0], [2, -1]])
def test_split_sequential_needs_positive_weights(weights: int | list[int]) -> None:
    with pytest.raises(ValueError, match="positive weight"):
        split_sequential(1, weights)


def test_accountant_adds_aggregates_and_takes_the_max_over_cells() -> None:
    accountant = QueryAccountant()
    assert accountant.total == 0
    count_eps, sum_eps = split_sequential(1, 2)
    for _cell in range(5):  # five disjoint GROUP BY cells
        accountant.record("count", count_eps)
        accountant.record("sum(income)", sum_eps)
    accountant.record("sum(income)", Fraction(1, 4))  # a cheaper cell changes nothing
    assert accountant.by_aggregate() == {"count": Fraction(1, 2), "sum(income)": Fraction(1, 2)}
    assert accountant.total == 1
