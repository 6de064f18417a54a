"""Stage 7 for noise mode: turn a query's bounded cell statistics into a noisy answer.

Three steps, so that the guard can charge the budget between them:

1. :func:`prepare` — which noisy statistics each cell needs, each one's cache key (its
   canonical selection, see ``selection``), and the query's ε split;
2. :meth:`Prepared.costs` — what the query would spend from each account, given what
   is cached and what each account has already received;
3. :meth:`Prepared.draw` then :meth:`Prepared.answer` — noise for the missing
   statistics only, then the rows, flags and notes.

Composition (``composition``): ε per query is split equally over its *groups*, one per
(noisy statistic, grouping level); the cells of one group compose in parallel because the
engine bounds each unit to ``cells_per_unit`` cells of a level and the noise scale
includes that factor. A group whose every cell is cached costs nothing; one new cell
costs the whole share.

Noisy statistics per aggregate:

- COUNT(*) / COUNT(col): bounded count + discrete Laplace (geometric) noise, Δ = c·m;
- SUM(col): sum of values clamped to [L, U] + Laplace on a grid, Δ = c·m·max(|L|, |U|);
- AVG(col), ``average: ratio`` (default): mid + noisy centred sum / max(noisy count, 1),
  clamped into [L, U]; the centred sum Σ(x - mid) has Δ = c·m·(U - L)/2, half that of
  the plain sum when L >= 0, and its noise does not grow with the mean;
- AVG(col), ``average: clamped_mean``: seed 001's clamping-down mean, with the size S
  replaced by the released noisy count (a true S would leak under add/remove
  neighbours), including its S = 0 case.

A GROUP BY row is shown only when its noisy count reaches the group threshold τ (a row
that exists because of one respondent would otherwise reveal them): δ ≤ c·a^(τ-m)/(1+a),
a = e^(-1/scale), per grouping level. Rows with fewer keys than the level are never
thresholded: the grand total of a query exists whatever the data.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from guard.noise.composition import format_epsilon, split_sequential
from guard.noise.mechanisms import (
    ContributionBounds,
    group_threshold_delta,
)
from guard.noise.sampling import RandomSource
from guard.noise.selection import cell_selection
from guard.noise.statistics import (
    NoiseConfig,
    Noisy,
    automatic_threshold,
    cache_key,
    draw_statistic,
    recipe,
    threshold_statistic,
    truths_of,
    value_of,
)
from guard.plan.noisy import Statistic
from guard.protection.answer import ordered_rows
from guard.query.shape import AggFunc, OutputKind, QueryShape
from guard.result import Flag, ProtectedResult
from guard.state.records import Draw

__all__ = ["Costs", "Prepared", "prepare", "spent_note"]


@dataclass(frozen=True)
class Costs:
    """ε the query would spend from each kind of account."""

    #: the asking analyst's own account: groups with a cell they have not received
    analyst: Fraction
    #: the global account: groups with a cell never drawn for anyone
    fresh: Fraction
    #: per budget group: groups with a cell no member has received
    groups: Mapping[str, Fraction]


@dataclass
class Prepared:
    """A query's noisy statistics, before any noise is drawn."""

    shape: QueryShape
    config: NoiseConfig
    #: per result row: its grouping level (the keys not rolled up) and key values
    levels: list[tuple[str, ...]]
    keys: list[tuple[Any, ...]]
    #: per result row: noisy statistic -> cache key
    cache_keys: list[dict[Noisy, str]]
    #: per result row: noisy statistic -> the bounded true statistics it is computed from
    truths: list[dict[Noisy, float]]
    #: ε per (statistic, level) group
    shares: dict[tuple[Noisy, tuple[str, ...]], Fraction]
    #: per aggregate of the shape: the noisy statistics its value is computed from
    recipes: list[tuple[Noisy, ...]]
    #: per level with keys: the statistic its rows are thresholded on
    thresholds: dict[tuple[str, ...], Noisy]
    #: per (statistic, level with keys): what is paid for, whatever cells exist
    group_keys: dict[tuple[Noisy, tuple[str, ...]], str]

    def costs(
        self,
        drawn: Mapping[str, Draw],
        received: set[str],
        by_group: Mapping[str, set[str]],
        ever: set[str] | None = None,
    ) -> Costs:
        """ε per account: ``drawn`` is the cache, ``received`` what the analyst has
        received, ``by_group`` what each of their budget groups has received, ``ever``
        what anyone has received (keys of cells and of grouped statistics; default: the
        cache's and the analyst's keys).

        Whether a GROUP BY level is paid for is decided on its group key (statistic,
        WHERE, grouping), never on which of its cells exist: an empty group and a group of
        one respondent (hidden by the threshold) must cost the same. A level without keys
        has exactly one row whatever the data, so its cell decides.
        """

        def cost(known: Mapping[str, Any] | set[str], grouped_known: set[str]) -> Fraction:
            total = Fraction(0)
            for group, share in self.shares.items():
                noisy, level = group
                key = self.group_keys.get(group)
                if key is not None:
                    unpaid = key not in grouped_known
                else:
                    unpaid = any(noisy in keys and keys[noisy] not in known for keys in self._rows_of(level))
                if unpaid:
                    total += share
            return total

        if ever is None:
            ever = set(drawn) | received
        return Costs(
            analyst=cost(received, received),
            fresh=cost(drawn, ever),
            groups={group: cost(keys, keys) for group, keys in by_group.items()},
        )

    @property
    def received_keys(self) -> set[str]:
        """Everything this answer gives: its cells' keys and its grouped statistics' keys."""
        return {key for keys in self.cache_keys for key in keys.values()} | set(self.group_keys.values())

    def draw(self, drawn: Mapping[str, Draw], rng: RandomSource | None = None) -> dict[str, Draw]:
        """Noise for every statistic not in ``drawn``: the new cache entries."""
        fresh: dict[str, Draw] = {}
        c, m = self.config.cells_per_unit, self.config.rows_per_cell
        for r, keys in enumerate(self.cache_keys):
            # counts first: a clamped mean reads its cell's released count
            for noisy in sorted(keys, key=lambda n: n.kind != "count"):
                key = keys[noisy]
                if key in drawn or key in fresh:
                    continue
                share = self.shares[(noisy, self.levels[r])]
                released_count = None
                if noisy.kind == "mean":
                    count_key = keys[Noisy("count", noisy.column)]
                    released_count = (fresh[count_key] if count_key in fresh else drawn[count_key]).value
                fresh[key] = draw_statistic(
                    noisy, self.truths[r], share, self.config, c, m, released_count, rng
                )
        return fresh

    def answer(self, drawn: Mapping[str, Draw], notes: Sequence[str] = ()) -> ProtectedResult:
        """The rows (thresholded, ordered, limited), all aggregates flagged ``noised``."""
        shape, config = self.shape, self.config
        rows: list[list[Any]] = []
        flags: list[list[str]] = []
        levels: list[tuple[str, ...]] = []  # of the rows kept, for the log
        used: dict[int, set[tuple[str, Fraction]]] = {}
        # one threshold per level (the automatic one costs a search): not one per row
        taus = {level: self._threshold(level) for level in self.thresholds}
        for r, keys in enumerate(self.cache_keys):
            level = self.levels[r]
            if level in taus and drawn[keys[self.thresholds[level]]].value < taus[level]:
                continue
            values: list[Any] = []
            row_flags: list[str] = []
            for output in shape.outputs:
                if output.kind is OutputKind.KEY:
                    values.append(self.keys[r][output.index])
                    row_flags.append(Flag.RELEASED.value)
                elif output.kind is OutputKind.GROUPING:
                    values.append(int(shape.group_by[output.index] not in level))
                    row_flags.append(Flag.RELEASED.value)
                else:
                    recipe = self.recipes[output.index]
                    parts = [drawn[keys[noisy]] for noisy in recipe]
                    used.setdefault(output.index, set()).update(
                        (n.kind, d.scale) for n, d in zip(recipe, parts, strict=True)
                    )
                    values.append(value_of(shape.aggregates[output.index].func, recipe, parts, config))
                    row_flags.append(Flag.NOISED.value)
            rows.append(values)
            flags.append(row_flags)
            levels.append(level)
        order = ordered_rows(shape, rows)
        return ProtectedResult(
            columns=[o.name for o in shape.outputs],
            rows=[rows[i] for i in order],
            flags=[flags[i] for i in order],
            notes=[*notes, *self._notes(used)],
            levels=tuple(levels[i] for i in order) if len(shape.levels) > 1 else None,
        )

    def _rows_of(self, level: tuple[str, ...]) -> list[dict[Noisy, str]]:
        return [keys for r, keys in enumerate(self.cache_keys) if self.levels[r] == level]

    def _threshold(self, level: tuple[str, ...]) -> int:
        if self.config.group_threshold is not None:
            return self.config.group_threshold
        return automatic_threshold(
            self._threshold_scale(level), self._threshold_bounds(level), self.config.delta
        )

    def _threshold_scale(self, level: tuple[str, ...]) -> Fraction:
        noisy = self.thresholds[level]
        bounds = self._threshold_bounds(level)
        return Fraction(bounds.rows_per_unit) / self.shares[(noisy, level)]

    def _threshold_bounds(self, level: tuple[str, ...]) -> ContributionBounds:
        m = 1 if self.thresholds[level].kind == "units" else self.config.rows_per_cell
        return ContributionBounds(self.config.cells_per_unit, m)

    def _notes(self, used: Mapping[int, set[tuple[str, Fraction]]]) -> list[str]:
        """Per noisy column, its mechanism and scale(s); the threshold and its δ; the
        contribution bounds. All of it follows from the policy and the query alone."""
        shape, config = self.shape, self.config
        notes = []
        for output in shape.outputs:
            if output.kind is not OutputKind.AGGREGATE or output.index not in used:
                continue
            aggregate = shape.aggregates[output.index]
            parts = []
            for kind in dict.fromkeys(kind for kind, _ in sorted(used[output.index])):
                scales = sorted(scale for k, scale in used[output.index] if k == kind)
                parts.append(f"{_DESCRIPTION[kind]} scale {', '.join(_number(s) for s in scales)}")
            clamp = ""
            if aggregate.column is not None and aggregate.func is not AggFunc.COUNT:
                low, high = config.bounds[aggregate.column]
                clamp = f"; values clamped to [{_number(low)}, {_number(high)}]"
            # an unaliased column is labelled by its function alone (count, sum), which
            # two columns may share: the note names the aggregate itself
            label = aggregate.label
            unaliased = output.name == label or label.startswith(f"{output.name}(")
            named = label if unaliased else f"{output.name} ({label})"
            notes.append(f"{named}: {'; '.join(parts)}{clamp}")
        for level in sorted(self.thresholds, key=len):
            if not any(self.levels[r] == level for r in range(len(self.levels))):
                continue
            tau = self._threshold(level)
            delta = group_threshold_delta(tau, self._threshold_scale(level), self._threshold_bounds(level))
            by = ", ".join(level)
            notes.append(
                f"rows grouped by {by} are shown only when their noisy count is at least {tau} "
                f"(δ ≤ {delta:.2g}): a group's existence alone could reveal a respondent"
            )
        m, c = config.rows_per_cell, config.cells_per_unit
        notes.append(
            f"contribution bounds: each respondent counts for at most {m} row{'s' * (m > 1)} per cell "
            f"and {c} cell{'s' * (c > 1)} per grouping level; negative noisy counts are shown as 0"
        )
        return notes


_DESCRIPTION = {
    "units": "noisy respondent count (geometric),",
    "count": "noisy count (geometric),",
    "sum": "noisy sum (Laplace on a grid),",
    "csum": "noisy centred sum (Laplace on a grid),",
    "mean": "clamping-down mean (seed 001, Laplace on a grid),",
}


def prepare(
    shape: QueryShape,
    rows: Sequence[Sequence[Any]],
    key_slots: Sequence[int],
    slots: Mapping[Statistic, int],
    grouping_slot: int | None,
    config: NoiseConfig,
    scope: Sequence[object],
) -> Prepared:
    """The noisy statistics of every row of a :func:`guard.plan.noisy.noisy_rewrite`
    result. ``scope`` (e.g. data version and table) prefixes every cache key."""
    recipes = [recipe(a.func, a.column, config.average) for a in shape.aggregates]
    needed = sorted({noisy for r in recipes for noisy in r})
    levels_of_rows: list[tuple[str, ...]] = []
    for row in rows:
        gid = int(row[grouping_slot]) if grouping_slot is not None else 0
        levels_of_rows.append(shape.kept_keys(gid))
    thresholds = {level: threshold_statistic(needed) for level in shape.levels if level}
    shares_of: list[tuple[Noisy, tuple[str, ...]]] = []
    for level in shape.levels:
        per_level = set(needed) | ({thresholds[level]} if level in thresholds else set())
        shares_of.extend((noisy, level) for noisy in sorted(per_level))
    shares = dict(zip(shares_of, split_sequential(config.epsilon, len(shares_of)), strict=True))
    cache_keys: list[dict[Noisy, str]] = []
    truths: list[dict[Noisy, float]] = []
    keys: list[tuple[Any, ...]] = []
    for r, row in enumerate(rows):
        level = levels_of_rows[r]
        values = tuple(row[s] for s in key_slots)
        keys.append(values)
        cell = [(k, values[shape.group_by.index(k)]) for k in level]
        selection = cell_selection(shape.predicates, cell, config.types)
        wanted = set(needed) | ({thresholds[level]} if level in thresholds else set())
        cache_keys.append({noisy: cache_key(scope, noisy, config, selection) for noisy in sorted(wanted)})
        truths.append(truths_of(row, slots))
    where = cell_selection(shape.predicates, [], config.types)
    group_keys = {
        (noisy, level): cache_key(scope, noisy, config, where) + json.dumps(sorted(level))
        for noisy, level in shares
        if level
    }
    return Prepared(
        shape, config, levels_of_rows, keys, cache_keys, truths, shares, recipes, thresholds, group_keys
    )


def _number(value: Fraction | float) -> str:
    number = float(value)
    if math.isfinite(number) and number == int(number) and abs(number) < 1e15:
        return str(int(number))
    return f"{number:.4g}"


def spent_note(spent: Fraction, left: Fraction, limit: Fraction, analyst: str) -> str:
    """The budget line of a noisy answer's notes."""
    if spent == 0:
        head = "noise: every value repeats an earlier release, no ε spent"
    else:
        head = f"noise: ε = {format_epsilon(spent)} spent on this query"
    return f"{head}; ε = {format_epsilon(left)} of {format_epsilon(limit)} left for analyst {analyst!r}"
