"""Noisy COUNT, SUM and AVG for one cell, with their sensitivity and ε stated exactly.

Neighbouring databases differ by one privacy unit (added or removed). The rewrite stage
enforces the contribution bounds upstream — at most ``cells_per_unit`` cells of a
GROUP BY per unit and at most ``rows_per_cell`` rows per unit in one cell, every measure
value clamped into [L, U] — so the L1 sensitivity over all cells of a query is:

    COUNT:  Δ = cells_per_unit · rows_per_cell
    SUM:    Δ = cells_per_unit · rows_per_cell · max(|L|, |U|)

Each cell gets noise of scale Δ/ε, which makes the whole vector of cells ε-DP; that is
why the cells of one aggregate compose in parallel (see ``composition``).

Every result carries its ε, sensitivity and scale. None of these, nor the mechanism's
name, depends on the data: notes built from them cannot leak a cell's size.

Post-processing (free under DP, applied to every release):
- a noisy COUNT below 0 is released as 0: a negative count is impossible, and clamping
  can only move the answer towards the truth; it biases near-empty cells upwards;
- a noisy SUM is clamped to ≥ 0 when L ≥ 0 (≤ 0 when U ≤ 0), for the same reason;
- a noisy mean is clamped into [L, U].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from guard.noise.sampling import (
    RandomSource,
    discrete_laplace,
    grid_laplace,
    power_of_two_at_most,
    resolve_source,
    round_to_grid,
)
from guard.policy.epsilon import EpsilonLike, as_epsilon

__all__ = [
    "ContributionBounds",
    "NoisyMean",
    "NoisyValue",
    "clamped_mean_seed",
    "clamped_ratio",
    "group_threshold_delta",
    "mean_from",
    "noisy_avg",
    "noisy_count",
    "noisy_sum",
]


@dataclass(frozen=True)
class ContributionBounds:
    """How far one privacy unit can reach into a query's cells (enforced by the rewrite)."""

    #: L0 bound: cells of one GROUP BY a single unit may contribute to
    cells_per_unit: int = 1
    #: L∞ bound: rows a single unit may contribute to one cell
    rows_per_cell: int = 1

    def __post_init__(self) -> None:
        if self.cells_per_unit < 1 or self.rows_per_cell < 1:
            raise ValueError(
                f"contribution bounds must be ≥ 1, got cells_per_unit={self.cells_per_unit}, "
                f"rows_per_cell={self.rows_per_cell}"
            )

    @property
    def rows_per_unit(self) -> int:
        """The most rows one unit adds to all cells together: the COUNT sensitivity."""
        return self.cells_per_unit * self.rows_per_cell


@dataclass(frozen=True)
class NoisyValue:
    """One noisy aggregate of one cell, ready to release."""

    #: the released value, after post-processing
    value: float
    #: ε spent by this release
    epsilon: Fraction
    #: L1 sensitivity Δ the noise was calibrated to
    sensitivity: Fraction
    #: noise scale in value units (Laplace b, or the geometric scale for counts)
    scale: Fraction
    #: which construction produced it, e.g. ``"geometric"``
    mechanism: str


@dataclass(frozen=True)
class NoisyMean:
    """A noisy mean released as noisy SUM / noisy COUNT; both parts may be released too."""

    value: float
    epsilon: Fraction
    sum: NoisyValue
    count: NoisyValue


def _checked_bounds(bounds: tuple[float, float]) -> tuple[float, float]:
    lower, upper = bounds
    if not (math.isfinite(lower) and math.isfinite(upper)) or lower > upper:
        raise ValueError(f"measure bounds must be finite with low ≤ high, got [{lower}, {upper}]")
    return lower, upper


def noisy_count(
    true_count: int,
    epsilon: EpsilonLike,
    contribution: ContributionBounds = ContributionBounds(),
    rng: RandomSource | None = None,
) -> NoisyValue:
    """COUNT + Z, Z ~ discrete Laplace of scale Δ/ε, Δ = cells_per_unit · rows_per_cell.

    The geometric mechanism (Ghosh, Roughgarden & Sundararajan 2009): exactly ε-DP on
    integers. Negative results are released as 0. Raises ``ValueError`` for a negative
    count or ε ≤ 0.
    """
    if true_count < 0:
        raise ValueError(f"a count cannot be negative, got {true_count}")
    eps = as_epsilon(epsilon)
    sensitivity = Fraction(contribution.rows_per_unit)
    scale = sensitivity / eps
    noisy = true_count + discrete_laplace(scale, rng)
    return NoisyValue(max(noisy, 0), eps, sensitivity, scale, "geometric")


def noisy_sum(
    clamped_sum: float,
    bounds: tuple[float, float],
    epsilon: EpsilonLike,
    contribution: ContributionBounds = ContributionBounds(),
    rng: RandomSource | None = None,
    *,
    granularity: float | int | Fraction | None = None,
) -> NoisyValue:
    """SUM of values clamped into [L, U], plus Laplace noise of scale Δ/ε on a grid.

    Δ = cells_per_unit · rows_per_cell · max(|L|, |U|): adding or removing one unit moves
    the sum by at most that. ``clamped_sum`` must be Σ clamp(x, L, U) over the cell (the
    rewrite computes it); see ``sampling.grid_laplace`` for the grid and ``granularity``.
    Raises ``ValueError`` for bad bounds, Δ = 0 (bounds [0, 0]) or ε ≤ 0.
    """
    lower, upper = _checked_bounds(bounds)
    per_row = Fraction(max(abs(lower), abs(upper)))
    if per_row == 0:
        raise ValueError("measure bounds [0, 0] leave nothing to protect; widen them or drop the measure")
    sensitivity = per_row * contribution.rows_per_unit
    sample = grid_laplace(clamped_sum, sensitivity, epsilon, rng, granularity=granularity)
    value = sample.value
    if lower >= 0:
        value = max(value, 0.0)
    elif upper <= 0:
        value = min(value, 0.0)
    return NoisyValue(value, sample.epsilon, sensitivity, sample.scale, "grid-laplace")


def mean_from(noisy_sum: NoisyValue, noisy_count: NoisyValue, bounds: tuple[float, float]) -> float:
    """Post-processing: clamp(sum / max(count, 1), L, U). Spends no ε.

    A released count of 0 is read as 1: the mean is then the (clamped) noisy sum, which
    is as uninformative as the noise says it should be.
    """
    return clamped_ratio(noisy_sum.value, noisy_count.value, bounds)


def clamped_ratio(total: float, count: float, bounds: tuple[float, float], centre: float = 0.0) -> float:
    """clamp(centre + total / max(count, 1), L, U): a mean from a noisy (centred) sum and
    a noisy count. Post-processing, spends no ε."""
    lower, upper = _checked_bounds(bounds)
    return min(max(centre + total / max(count, 1), lower), upper)


def noisy_avg(
    clamped_sum: float,
    count: int,
    bounds: tuple[float, float],
    epsilon: EpsilonLike,
    contribution: ContributionBounds = ContributionBounds(),
    rng: RandomSource | None = None,
    *,
    sum_share: Fraction = Fraction(1, 2),
) -> NoisyMean:
    """AVG as noisy SUM / noisy COUNT: ε_sum = ε · sum_share, ε_count = ε - ε_sum.

    The two releases compose sequentially to exactly ε, and the mean is post-processing
    of them, so a query that also asks for COUNT and SUM of the same cell can reuse both
    parts at no extra cost. The default split is even; shifting ε towards the sum helps
    when max(|L|, |U|) is large relative to the mean. Raises ``ValueError`` unless
    0 < sum_share < 1, and as ``noisy_sum``/``noisy_count`` do.
    """
    if not 0 < sum_share < 1:
        raise ValueError(f"sum_share must be strictly between 0 and 1, got {sum_share}")
    eps = as_epsilon(epsilon)
    sum_part = noisy_sum(clamped_sum, bounds, eps * sum_share, contribution, rng)
    count_part = noisy_count(count, eps * (1 - sum_share), contribution, rng)
    return NoisyMean(mean_from(sum_part, count_part, bounds), eps, sum_part, count_part)


_SEED_MEAN = "clamped-mean (seed 001)"
#: the seed mean's output grid is the largest power of two ≤ (mx - mn) / this
_SEED_MEAN_GRID_STEPS = 2**32


def clamped_mean_seed(
    clamped_sum: float,
    size: int,
    bounds: tuple[float, float],
    epsilon: EpsilonLike,
    rng: RandomSource | None = None,
) -> NoisyValue:
    """The "differentially private clamping-down mean" of seed 001 (Li et al. 2016 §2.5.4).

    As the seed writes it, with mn, mx = bounds, S = size (one row per unit), Δ = mx - mn:

        if S = 0:  r ~ uniform[0, 1)
                   r < ½·e^(-ε/2)  → mn
                   r < e^(-ε/2)    → mx
                   else            → mn + Δ·(r - e^(-ε/2)) / (1 - e^(-ε/2))
        else:      q'((sum(D) + L(0, Δ/ε)) / S),  q' = clamp into [mn, mx]

    ``clamped_sum`` must be Σ clamp(x, mn, mx): the seed's sensitivity assumes every
    value lies in range. Both branches release points of one data-independent grid,
    the largest power of two h ≤ Δ/2^32, plus mn and mx themselves. Dividing a noisy
    sum by S would leave a lattice of step g/S that gives S away, so the S > 0 branch
    draws the equal-in-law mean + L(0, Δ/(εS)) as ``grid_laplace(sum/S, Δ/S, ε)`` on h;
    the S = 0 value is rounded to h (its draw involves no data, so a uniform double is
    safe there). h is ~2^-32 of the range, far below the noise for any S < 2^20.

    Guarantee: ε-DP when S is public (neighbours replace one value). When a neighbour
    adds or removes a unit, S changes too: the density ratio gains a factor (S + 1)/S,
    so the loss is ε + ln((S + 1)/S) ≤ ε + ln 2; the S = 0 case is built for the step
    0 ↔ 1 and stays within ε. Hence ``noisy_avg`` is the default for AVG. The reported
    scale is the seed's noise on the sum, Δ/ε: the noise on the mean would reveal S.
    """
    if size < 0:
        raise ValueError(f"a size cannot be negative, got {size}")
    lower, upper = _checked_bounds(bounds)
    eps = as_epsilon(epsilon)
    sensitivity = Fraction(upper) - Fraction(lower)
    if sensitivity == 0:
        raise ValueError(f"the clamped mean needs mn < mx, got [{lower}, {upper}]")
    grid = power_of_two_at_most(sensitivity / _SEED_MEAN_GRID_STEPS)
    # Both draws happen whatever S is, so the time taken does not tell S = 0 apart.
    divisor = max(size, 1)
    sample = grid_laplace(Fraction(clamped_sum) / divisor, sensitivity / divisor, eps, rng, granularity=grid)
    r = resolve_source(rng).uniform01()
    if size > 0:
        value = sample.value
    else:
        cut = math.exp(-float(eps) / 2)
        if r < cut / 2:
            value = lower
        elif r < cut:
            value = upper
        else:
            uniform = lower + (upper - lower) * (r - cut) / (1 - cut)
            value = float(round_to_grid(uniform, grid) * grid)
    return NoisyValue(float(min(max(value, lower), upper)), eps, sensitivity, sensitivity / eps, _SEED_MEAN)


def group_threshold_delta(
    threshold: int, count_scale: Fraction, contribution: ContributionBounds = ContributionBounds()
) -> float:
    """δ of showing a GROUP BY cell only when its released noisy count is ≥ ``threshold``.

    A cell that exists only because of one unit holds at most m = rows_per_cell rows; it
    is shown with probability P(m + Z ≥ τ) = a^(τ-m)/(1 + a) for τ > m (1 otherwise), with
    a = e^(-1/scale) and Z the count's discrete Laplace noise. One unit can create up to
    c = cells_per_unit such cells, so δ ≤ c·a^(τ-m)/(1 + a) (union bound, capped at 1).
    """
    gap = threshold - contribution.rows_per_cell
    if gap <= 0:
        return 1.0
    a = math.exp(-1.0 / float(count_scale))
    return min(1.0, contribution.cells_per_unit * a**gap / (1.0 + a))
