"""Noise mode's pure core: exact samplers, mechanisms, ε accounting, budgets, the noise cache.

Stage 6 (noise) of the query path (docs/ARCHITECTURE.md) for tables whose policy chooses
noise. Nothing here touches the engine or the state store: the rewrite
(``guard.plan.noisy``) supplies bounded sums and counts; the guard charges the ledger and
persists draws.

    sampling     secure randomness; exact discrete Laplace; Laplace on a grid
    mechanisms   noisy COUNT / SUM / AVG, the seed's clamped mean, group-threshold δ
    composition  exact ε: parsing, sequential split, per-query accountant
    budget       the ledger: per-analyst, group and global limits, atomic charges
    selection    the canonical selection of a cell: what a noisy draw is cached under
    statistics   which noisy statistics an aggregate needs, their cache keys, one draw
    release      a query's statistics -> ε split, costs, draws, the noisy answer
    stage        stage 6 of the query path in noise mode: measure, check and charge, release
"""

from guard.noise.budget import BudgetExceeded, Ledger
from guard.noise.composition import QueryAccountant, format_epsilon, split_sequential
from guard.noise.mechanisms import (
    ContributionBounds,
    NoisyMean,
    NoisyValue,
    clamped_mean_seed,
    group_threshold_delta,
    mean_from,
    noisy_avg,
    noisy_count,
    noisy_sum,
)
from guard.noise.sampling import (
    GridSample,
    RandomSource,
    SystemRandomSource,
    default_source,
    discrete_laplace,
    grid_laplace,
)
from guard.policy.epsilon import EpsilonLike, as_epsilon

# InsecureSeededSource is deliberately not re-exported: tests import it from
# guard.noise.sampling, production code has no reason to.
__all__ = [
    "BudgetExceeded",
    "ContributionBounds",
    "EpsilonLike",
    "GridSample",
    "Ledger",
    "NoisyMean",
    "NoisyValue",
    "QueryAccountant",
    "RandomSource",
    "SystemRandomSource",
    "as_epsilon",
    "clamped_mean_seed",
    "default_source",
    "discrete_laplace",
    "format_epsilon",
    "grid_laplace",
    "group_threshold_delta",
    "mean_from",
    "noisy_avg",
    "noisy_count",
    "noisy_sum",
    "split_sequential",
]
