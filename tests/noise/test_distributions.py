"""Statistical tests of the samplers against their exact laws (slow; fixed test seeds).

Each test draws enough samples that a wrong constant (a scale off by 10 %, zero counted
twice, a biased Bernoulli) fails, and uses a fixed seed so a pass is reproducible. The
thresholds are alpha = 0.001 per test.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from guard.noise.mechanisms import clamped_mean_seed
from guard.noise.sampling import (
    InsecureSeededSource,
    bernoulli_exp,
    discrete_laplace,
    discrete_laplace_cdf,
    discrete_laplace_pmf,
    grid_laplace,
)

pytestmark = pytest.mark.slow

ALPHA = 1e-3


def _chi_square_against_pmf(samples: list[int], scale: float) -> float:
    """p-value of a chi-square test of integer samples against the discrete Laplace PMF."""
    n = len(samples)
    # bins from the centre outwards while each expects ≥ 20 samples; tails merged
    width = 0
    while n * discrete_laplace_pmf(width + 1, scale) >= 20:
        width += 1
    values, counts = np.unique(np.clip(samples, -width - 1, width + 1), return_counts=True)
    observed = dict(zip(values.tolist(), counts.tolist(), strict=True))
    tail = discrete_laplace_cdf(-width - 1, scale)
    expected = [tail] + [discrete_laplace_pmf(z, scale) for z in range(-width, width + 1)] + [tail]
    support = range(-width - 1, width + 2)
    return float(stats.chisquare([observed.get(z, 0) for z in support], np.array(expected) * n).pvalue)


@pytest.mark.parametrize("scale", [Fraction(1, 2), Fraction(1), Fraction(5, 2), Fraction(20480, 3829)])
def test_discrete_laplace_matches_its_pmf(scale: Fraction) -> None:
    rng = InsecureSeededSource(int(scale * 1000))
    samples = [discrete_laplace(scale, rng) for _ in range(40_000)]
    assert _chi_square_against_pmf(samples, float(scale)) > ALPHA


def test_discrete_laplace_with_a_large_scale_passes_kolmogorov_smirnov() -> None:
    scale = 2048.0
    rng = InsecureSeededSource(2048)
    samples = np.sort(np.array([discrete_laplace(Fraction(2048), rng) for _ in range(30_000)]))
    n = samples.size
    support = np.unique(samples)
    empirical = np.searchsorted(samples, support, side="right") / n
    exact = np.array([discrete_laplace_cdf(int(z), scale) for z in support])
    below = np.array([discrete_laplace_cdf(int(z) - 1, scale) for z in support])
    empirical_below = np.searchsorted(samples, support, side="left") / n
    statistic = max(np.max(np.abs(empirical - exact)), np.max(np.abs(empirical_below - below)))
    # the continuous-case critical value is conservative for a discrete law
    assert statistic < stats.kstwo.ppf(1 - ALPHA, n)


def test_a_scale_off_by_ten_percent_is_detected() -> None:
    rng = InsecureSeededSource(10)
    samples = [discrete_laplace(Fraction(11, 4), rng) for _ in range(40_000)]
    assert _chi_square_against_pmf(samples, 2.5) < ALPHA


@pytest.mark.parametrize(("numerator", "denominator"), [(1, 3), (1, 1), (5, 2), (7, 1)])
def test_bernoulli_exp_has_probability_e_to_the_minus_gamma(numerator: int, denominator: int) -> None:
    rng = InsecureSeededSource(numerator * 31 + denominator)
    n = 20_000
    hits = sum(bernoulli_exp(numerator, denominator, rng) for _ in range(n))
    assert stats.binomtest(hits, n, math.exp(-numerator / denominator)).pvalue > ALPHA


def test_grid_laplace_is_discrete_laplace_on_its_grid() -> None:
    rng = InsecureSeededSource(64)
    value, delta, eps = 3300.3, 99000, Fraction(1, 2)
    samples = [grid_laplace(value, delta, eps, rng) for _ in range(30_000)]
    grid = samples[0].granularity
    centre = round(value / grid)
    steps = [int(Fraction(s.value) / grid) - centre for s in samples]
    assert _chi_square_against_pmf(steps, float(math.ceil(delta / grid) / eps)) > ALPHA


def test_grid_laplace_is_close_to_the_continuous_laplace() -> None:
    rng = InsecureSeededSource(65)
    samples = [grid_laplace(3300.3, 99000, 1, rng).value - 3300.3 for _ in range(20_000)]
    assert stats.kstest(samples, "laplace", args=(0, 99000)).pvalue > ALPHA


def test_seed_mean_of_an_empty_set_has_the_seed_distribution() -> None:
    # S = 0: mass ½e^(-ε/2) at mn and at mx, the rest uniform on [mn, mx]
    eps, lower, upper, n = 1.0, 1000.0, 100000.0, 20_000
    rng = InsecureSeededSource(0)
    values = np.array([clamped_mean_seed(0.0, 0, (lower, upper), eps, rng).value for _ in range(n)])
    edge = 0.5 * math.exp(-eps / 2)
    interior = values[(values > lower) & (values < upper)]
    observed = [np.sum(values == lower), np.sum(values == upper)]
    observed += np.histogram(interior, bins=10, range=(lower, upper))[0].tolist()
    expected = [edge * n, edge * n] + [(1 - 2 * edge) * n / 10] * 10
    assert stats.chisquare(observed, expected).pvalue > ALPHA
