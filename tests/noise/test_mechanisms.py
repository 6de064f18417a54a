"""Noisy COUNT / SUM / AVG and the seed's clamped mean: sensitivity, ε, post-processing."""

from __future__ import annotations

from fractions import Fraction

import pytest

from guard.noise.mechanisms import (
    ContributionBounds,
    NoisyValue,
    clamped_mean_seed,
    group_threshold_delta,
    mean_from,
    noisy_avg,
    noisy_count,
    noisy_sum,
)
from guard.noise.sampling import InsecureSeededSource, discrete_laplace_pmf

HOSPITAL_BOUNDS = (1000.0, 100000.0)
ENFIELD = [1000, 2000, 3000, 2000, 1000, 6000, 2000, 10000, 2000, 4000]


def test_count_sensitivity_is_cells_per_unit_times_rows_per_cell() -> None:
    released = noisy_count(
        10, 0.5, ContributionBounds(cells_per_unit=3, rows_per_cell=2), InsecureSeededSource(1)
    )
    assert released.sensitivity == 6
    assert released.scale == 12
    assert released.epsilon == Fraction(1, 2)
    assert released.mechanism == "geometric"
    assert released.value == int(released.value)


def test_negative_noisy_counts_are_released_as_zero() -> None:
    rng = InsecureSeededSource(2)
    values = [noisy_count(0, 0.5, rng=rng).value for _ in range(300)]
    assert min(values) == 0
    assert values.count(0) > 100  # about half the draws fall at or below zero


def test_count_rejects_a_negative_true_count() -> None:
    with pytest.raises(ValueError, match="cannot be negative"):
        noisy_count(-1, 1)


@pytest.mark.parametrize(("cells", "rows"), [(0, 1), (1, 0)])
def test_contribution_bounds_must_be_positive(cells: int, rows: int) -> None:
    with pytest.raises(ValueError, match="must be ≥ 1"):
        ContributionBounds(cells_per_unit=cells, rows_per_cell=rows)


@pytest.mark.parametrize(
    ("bounds", "per_row"), [((1000.0, 100000.0), 100000), ((-5.0, 2.0), 5), ((-3.0, -1.0), 3)]
)
def test_sum_sensitivity_is_the_largest_bound_times_the_contributions(
    bounds: tuple[float, float], per_row: int
) -> None:
    released = noisy_sum(0.0, bounds, 1, ContributionBounds(2, 3), InsecureSeededSource(3))
    assert released.sensitivity == per_row * 6
    assert released.scale >= released.sensitivity  # grid scale ≥ Δ/ε, here ε = 1
    assert released.scale < released.sensitivity * Fraction(1025, 1024)


def test_sum_is_clamped_to_the_sign_of_the_bounds() -> None:
    rng = InsecureSeededSource(4)
    assert all(noisy_sum(0.0, (0.0, 10.0), 1, rng=rng).value >= 0 for _ in range(200))
    assert all(noisy_sum(0.0, (-10.0, 0.0), 1, rng=rng).value <= 0 for _ in range(200))
    mixed = [noisy_sum(0.0, (-10.0, 10.0), 1, rng=rng).value for _ in range(200)]
    assert min(mixed) < 0 < max(mixed)


@pytest.mark.parametrize(
    ("bounds", "message"),
    [((0.0, 0.0), "nothing to protect"), ((5.0, 1.0), "low ≤ high"), ((0.0, float("inf")), "finite")],
)
def test_sum_rejects_bad_bounds(bounds: tuple[float, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        noisy_sum(1.0, bounds, 1)


def test_avg_splits_epsilon_exactly_and_reuses_its_parts() -> None:
    released = noisy_avg(33000.0, 10, HOSPITAL_BOUNDS, 1, rng=InsecureSeededSource(5))
    assert released.epsilon == 1
    assert released.sum.epsilon + released.count.epsilon == 1
    assert released.sum.epsilon == Fraction(1, 2)
    assert released.value == mean_from(released.sum, released.count, HOSPITAL_BOUNDS)
    skewed = noisy_avg(33000.0, 10, HOSPITAL_BOUNDS, 1, rng=InsecureSeededSource(5), sum_share=Fraction(3, 4))
    assert (skewed.sum.epsilon, skewed.count.epsilon) == (Fraction(3, 4), Fraction(1, 4))


@pytest.mark.parametrize("share", [Fraction(0), Fraction(1), Fraction(3, 2)])
def test_avg_rejects_a_degenerate_split(share: Fraction) -> None:
    with pytest.raises(ValueError, match="sum_share"):
        noisy_avg(1.0, 1, HOSPITAL_BOUNDS, 1, sum_share=share)


def _released(value: float) -> NoisyValue:
    return NoisyValue(value, Fraction(1), Fraction(1), Fraction(1), "test")


def test_mean_from_clamps_and_never_divides_by_zero() -> None:
    assert mean_from(_released(50000.0), _released(0), HOSPITAL_BOUNDS) == 50000.0
    assert mean_from(_released(-7.0), _released(3), HOSPITAL_BOUNDS) == 1000.0
    assert mean_from(_released(1e9), _released(2), HOSPITAL_BOUNDS) == 100000.0
    assert mean_from(_released(33000.0), _released(10), HOSPITAL_BOUNDS) == 3300.0


def test_seed_mean_with_a_huge_database_is_accurate() -> None:
    # seed 001: S = 10^6, ε = 1 gives noise of scale (max - min)/S = 0.099 on the mean
    rng = InsecureSeededSource(6)
    values = [clamped_mean_seed(3300.0 * 10**6, 10**6, HOSPITAL_BOUNDS, 1, rng).value for _ in range(50)]
    assert all(abs(v - 3300) < 3 for v in values)


def test_seed_mean_stays_in_bounds() -> None:
    rng = InsecureSeededSource(7)
    for size, total in [(0, 0.0), (1, 1000.0), (10, float(sum(ENFIELD)))]:
        for _ in range(100):
            assert 1000 <= clamped_mean_seed(total, size, HOSPITAL_BOUNDS, 1, rng).value <= 100000


def test_seed_mean_metadata_and_output_grid_do_not_reveal_the_size() -> None:
    rng = InsecureSeededSource(8)
    grid = Fraction(2) ** -16  # largest power of two ≤ 99000 / 2^32
    seen = set()
    for size, total in [(0, 0.0), (1, 5000.0), (10, 33000.0), (11, 133000.0)]:
        for _ in range(30):
            released = clamped_mean_seed(total, size, HOSPITAL_BOUNDS, 1, rng)
            seen.add((released.epsilon, released.sensitivity, released.scale, released.mechanism))
            assert released.value in HOSPITAL_BOUNDS or Fraction(released.value) % grid == 0
    assert seen == {(Fraction(1), Fraction(99000), Fraction(99000), "clamped-mean (seed 001)")}


def test_seed_mean_rejects_empty_range_and_negative_size() -> None:
    with pytest.raises(ValueError, match="mn < mx"):
        clamped_mean_seed(0.0, 1, (5.0, 5.0), 1)
    with pytest.raises(ValueError, match="cannot be negative"):
        clamped_mean_seed(0.0, -1, HOSPITAL_BOUNDS, 1)


def test_mechanisms_are_reproducible_with_the_same_test_seed() -> None:
    def run(seed: int) -> list[float]:
        rng = InsecureSeededSource(seed)
        return [
            noisy_count(10, 1, rng=rng).value,
            noisy_sum(33000.0, HOSPITAL_BOUNDS, 1, rng=rng).value,
            clamped_mean_seed(33000.0, 10, HOSPITAL_BOUNDS, 1, rng).value,
        ]

    assert run(9) == run(9)
    assert run(9) != run(10)


def test_group_threshold_delta_matches_the_noise_tail() -> None:
    scale = Fraction(2)
    # one unit with one row: the cell shows iff 1 + Z ≥ 5, i.e. Z ≥ 4
    tail = sum(discrete_laplace_pmf(z, float(scale)) for z in range(4, 400))
    assert group_threshold_delta(5, scale) == pytest.approx(tail)
    assert group_threshold_delta(5, scale, ContributionBounds(cells_per_unit=3)) == pytest.approx(3 * tail)
    assert group_threshold_delta(1, scale) == 1.0
