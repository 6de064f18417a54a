"""The noisy statistics of noise mode, one at a time: which ones an aggregate needs, what
each is cached under, and how one is drawn.

An aggregate's value is computed from noisy statistics (:func:`recipe`): a bounded count
("count", or "units" for the respondent count GROUP BY rows are thresholded on), a
clamped sum ("sum"), a centred sum ("csum") or seed 001's clamping-down mean ("mean").
Each is cached under :func:`cache_key`: what is measured (the statistic, what bounds it
and the cell's canonical selection), never the SQL text. :mod:`~guard.noise.release`
assembles them into an answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from guard.noise.mechanisms import (
    ContributionBounds,
    clamped_mean_seed,
    clamped_ratio,
    group_threshold_delta,
    noisy_count,
    noisy_sum,
)
from guard.noise.sampling import RandomSource
from guard.plan.noisy import Statistic
from guard.query.shape import AggFunc, QueryShape
from guard.state.records import Draw

__all__ = [
    "MAX_THRESHOLD",
    "NoiseConfig",
    "Noisy",
    "automatic_threshold",
    "cache_key",
    "draw_statistic",
    "recipe",
    "statistics_for",
    "threshold_statistic",
    "truths_of",
    "value_of",
]

#: smallest automatic threshold tried is m + 1; the search stops here (δ ≤ 1e-300 long before)
MAX_THRESHOLD = 100_000


@dataclass(frozen=True)
class NoiseConfig:
    """The policy's noise parameters for one table, as the release needs them."""

    epsilon: Fraction
    average: str
    cells_per_unit: int
    rows_per_cell: int
    #: None: the smallest threshold with δ <= ``delta``
    group_threshold: int | None
    delta: float
    #: declared [L, U] of each measure
    bounds: Mapping[str, tuple[float, float]]
    #: engine type names of the columns (integer-ness closes ranges)
    types: Mapping[str, str]


@dataclass(frozen=True)
class Noisy:
    """A noisy statistic: "units", "count", "sum", "csum" (centred sum) or "mean"."""

    kind: str
    column: str | None = None

    def __lt__(self, other: Noisy) -> bool:  # COUNT(*) (column None) sorts first
        return (self.kind, self.column or "") < (other.kind, other.column or "")

    @property
    def label(self) -> str:
        return f"{self.kind}({self.column or '*'})"


def recipe(func: AggFunc, column: str | None, average: str) -> tuple[Noisy, ...]:
    """The noisy statistics an aggregate's value is computed from."""
    if func is AggFunc.COUNT:
        return (Noisy("count", column),)
    if func is AggFunc.SUM:
        return (Noisy("sum", column),)
    if average == "clamped_mean":
        return (Noisy("count", column), Noisy("mean", column))
    return (Noisy("csum", column), Noisy("count", column))


def threshold_statistic(needed: Sequence[Noisy]) -> Noisy:
    """What GROUP BY rows are thresholded on: a count the query releases anyway
    (COUNT(*) first), else a dedicated respondent count."""
    counts = sorted((n for n in needed if n.kind == "count"), key=lambda n: n.column is not None)
    return counts[0] if counts else Noisy("units")


def statistics_for(shape: QueryShape, average: str) -> list[Statistic]:
    """The bounded statistics the engine must return for ``shape``'s noisy answer."""
    recipes = [recipe(a.func, a.column, average) for a in shape.aggregates]
    needed = {noisy for r in recipes for noisy in r}
    if shape.group_by:
        needed.add(threshold_statistic(sorted(needed)))
    wanted: set[Statistic] = set()
    for noisy in needed:
        if noisy.kind == "units":
            wanted.add(Statistic("units"))
        elif noisy.kind == "count":
            wanted.add(Statistic("count", noisy.column))
        else:  # sum, csum and mean read the clamped sum and the bounded count
            wanted.update((Statistic("sum", noisy.column), Statistic("count", noisy.column)))
    return sorted(wanted, key=lambda s: (s.kind, s.column or ""))


def automatic_threshold(scale: Fraction, bounds: ContributionBounds, delta: float) -> int:
    """The smallest τ > m with group_threshold_delta(τ) <= ``delta``."""
    for tau in range(bounds.rows_per_cell + 1, MAX_THRESHOLD):
        if group_threshold_delta(tau, scale, bounds) <= delta:
            return tau
    return MAX_THRESHOLD


def cache_key(scope: Sequence[object], noisy: Noisy, config: NoiseConfig, selection: str) -> str:
    # what is measured: the statistic, what bounds it (clamping, contribution) and the rows
    bounds = config.bounds.get(noisy.column) if noisy.column and noisy.kind != "count" else None
    contribution = [config.cells_per_unit, 1 if noisy.kind == "units" else config.rows_per_cell]
    return json.dumps(
        [*scope, noisy.kind, noisy.column, bounds, contribution, json.loads(selection)],
        separators=(",", ":"),
        default=str,
    )


def truths_of(row: Sequence[Any], slots: Mapping[Statistic, int]) -> dict[Noisy, float]:
    truths: dict[Noisy, float] = {}
    for statistic, slot in slots.items():
        value = row[slot]
        number = 0.0 if value is None else float(value)
        truths[Noisy(statistic.kind, statistic.column)] = number
    return truths


def draw_statistic(
    noisy: Noisy,
    truths: Mapping[Noisy, float],
    epsilon: Fraction,
    config: NoiseConfig,
    c: int,
    m: int,
    released_count: float | None,
    rng: RandomSource | None,
) -> Draw:
    if noisy.kind == "units":
        v = noisy_count(int(truths[noisy]), epsilon, ContributionBounds(c, 1), rng)
        return Draw(float(v.value), v.scale, epsilon, v.mechanism)
    if noisy.kind == "count":
        v = noisy_count(int(truths[noisy]), epsilon, ContributionBounds(c, m), rng)
        return Draw(float(v.value), v.scale, epsilon, v.mechanism)
    assert noisy.column is not None
    low, high = config.bounds[noisy.column]
    total = truths[Noisy("sum", noisy.column)]
    count = truths[Noisy("count", noisy.column)]
    if noisy.kind == "sum":
        v = noisy_sum(total, (low, high), epsilon, ContributionBounds(c, m), rng)
        return Draw(v.value, v.scale, epsilon, v.mechanism)
    if noisy.kind == "csum":
        half = (high - low) / 2
        v = noisy_sum(total - (low + half) * count, (-half, half), epsilon, ContributionBounds(c, m), rng)
        return Draw(v.value, v.scale, epsilon, v.mechanism)
    # the seed's clamped mean with the released size S~: (Σ(x - L) + S~·L + noise) / S~
    assert released_count is not None
    size = int(released_count)
    shifted = total - low * count + size * low
    v = clamped_mean_seed(shifted, size, (low, high), epsilon / (c * m), rng)
    # the scale of the noise on the sum: the one on the mean would reveal S~
    return Draw(v.value, v.scale, epsilon, v.mechanism)


def value_of(
    func: AggFunc, recipe: tuple[Noisy, ...], parts: Sequence[Draw], config: NoiseConfig
) -> float | int:
    if func is AggFunc.COUNT:
        return int(parts[0].value)
    if func is AggFunc.SUM:
        return parts[0].value
    if recipe[1].kind == "mean":
        return parts[1].value
    column = recipe[0].column
    assert column is not None
    low, high = config.bounds[column]
    return clamped_ratio(parts[0].value, parts[1].value, (low, high), centre=(low + high) / 2)
