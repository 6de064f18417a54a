"""Empirical privacy loss on the seed 001 hospital example (slow; fixed test seeds).

Enfield's ten incomes have mean 3300; the neighbouring database adds Ms. Rich (100000),
which moves the plain mean to 12090.9 and gives her away. With bounds [1000, 100000]
and ε = 1, the histograms of released means under the two databases must agree within
a factor e^ε in every bin (up to sampling error): the answer no longer says whether she
is there. A control run with too little noise must fail the same check, so the check
has the power to see a leak.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from guard.noise.mechanisms import clamped_mean_seed, noisy_avg
from guard.noise.sampling import InsecureSeededSource, RandomSource

pytestmark = pytest.mark.slow

ENFIELD = [1000, 2000, 3000, 2000, 1000, 6000, 2000, 10000, 2000, 4000]
WITH_RICH = [*ENFIELD, 100000]
BOUNDS = (1000.0, 100000.0)
SAMPLES = 15_000
#: bins holding fewer samples than this in either histogram are too noisy to compare
MIN_COUNT = 200
#: allowed excess of a bin ratio over e^ε, in standard errors of its log
Z = 4.0

Mechanism = Callable[[list[int], RandomSource], float]


def _seed_mean(epsilon: float) -> Mechanism:
    return lambda incomes, rng: (
        clamped_mean_seed(float(sum(incomes)), len(incomes), BOUNDS, epsilon, rng).value
    )


def _sum_over_count(epsilon: float) -> Mechanism:
    return lambda incomes, rng: noisy_avg(float(sum(incomes)), len(incomes), BOUNDS, epsilon, rng=rng).value


def _worst_log_ratio(mechanism: Mechanism, seed: int) -> float:
    """max over bins of |ln(p/p')| minus Z standard errors: a lower confidence bound."""
    rng = InsecureSeededSource(seed)
    without = np.array([mechanism(ENFIELD, rng) for _ in range(SAMPLES)])
    with_rich = np.array([mechanism(WITH_RICH, rng) for _ in range(SAMPLES)])
    # the clamped endpoints are point masses: give each its own bin
    edges = np.concatenate([[BOUNDS[0], np.nextafter(BOUNDS[0], np.inf)], np.linspace(2000, 99000, 98)])
    edges = np.concatenate([edges, [np.nextafter(BOUNDS[1], -np.inf), BOUNDS[1], np.inf]])
    counts_without = np.histogram(without, bins=edges)[0]
    counts_with = np.histogram(with_rich, bins=edges)[0]
    worst = -math.inf
    for a, b in zip(counts_without, counts_with, strict=True):
        if min(a, b) < MIN_COUNT:
            continue
        standard_error = math.sqrt(1 / a + 1 / b)
        worst = max(worst, abs(math.log(a / b)) - Z * standard_error)
    assert worst > -math.inf, "no bin had enough samples to compare"
    return worst


@pytest.mark.parametrize(
    ("mechanism", "seed"),
    [(_seed_mean(1.0), 1), (_sum_over_count(1.0), 2)],
    ids=["seed-clamped-mean", "sum-over-count"],
)
def test_ms_rich_is_hidden_within_e_to_the_epsilon(mechanism: Mechanism, seed: int) -> None:
    assert _worst_log_ratio(mechanism, seed) <= 1.0


def test_too_little_noise_is_caught_by_the_same_check() -> None:
    # noise calibrated to ε = 3 while claiming ε = 1: the clamp at 1000 alone has ratio e^3
    assert _worst_log_ratio(_seed_mean(3.0), 3) > 1.0
