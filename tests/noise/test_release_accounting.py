"""Stage 7 of noise mode on hand-made engine rows: ε split, costs per account, draws, answers."""

from __future__ import annotations

import dataclasses
from collections import ChainMap
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.backends.base import TableInfo
from guard.noise.mechanisms import ContributionBounds, group_threshold_delta
from guard.noise.release import Prepared, prepare
from guard.noise.sampling import InsecureSeededSource
from guard.noise.statistics import NoiseConfig, automatic_threshold, statistics_for
from guard.plan.noisy import NoisyPlan, noisy_rewrite
from guard.policy.load import load_policy
from guard.query.analyze import analyze
from guard.query.parse import parse
from guard.query.shape import QueryShape
from guard.query.validate import validate
from guard.state.records import Draw

ROOT = Path(__file__).resolve().parents[2]
POLICY = load_policy(ROOT / "policies" / "hospital-dp.yaml")
TYPES = {"town": "VARCHAR", "income": "BIGINT"}
LOW, HIGH = 1000.0, 100000.0
CONFIG = NoiseConfig(
    epsilon=Fraction(1),
    average="ratio",
    cells_per_unit=1,
    rows_per_cell=1,
    group_threshold=None,
    delta=1e-6,
    bounds={"income": (LOW, HIGH)},
    types=TYPES,
)
SCOPE = ("version-1", "hospital")


def shape_of(sql: str) -> QueryShape:
    select, table = validate(parse(sql, POLICY.limits), POLICY.tables)
    return analyze(select, table, TYPES, POLICY.limits)


def plan_of(shape: QueryShape, config: NoiseConfig, one_row_per_unit: bool = False) -> NoisyPlan:
    info = TableInfo("hospital", TYPES, rows=100, units=100, one_row_per_unit=one_row_per_unit)
    return noisy_rewrite(
        shape,
        info,
        statistics_for(shape, config.average),
        config.bounds,
        cells_per_unit=config.cells_per_unit,
        rows_per_cell=config.rows_per_cell,
        salt=1,
    )


def engine_row(
    plan: NoisyPlan, keys: Sequence[Any] = (), gid: int = 0, n: int = 10, total: float | None = None
) -> list[Any]:
    """One row as the plan's query returns it: n units, rows and values summing to ``total``."""
    width = 1 + max([*plan.key_slots, *plan.slots.values(), plan.grouping_slot or 0])
    row: list[Any] = [None] * width
    for slot, value in zip(plan.key_slots, keys, strict=True):
        row[slot] = value
    for statistic, slot in plan.slots.items():
        row[slot] = (5000.0 * n if total is None else total) if statistic.kind == "sum" else n
    if plan.grouping_slot is not None:
        row[plan.grouping_slot] = gid
    return row


def prepared(
    sql: str, cells: Sequence[tuple[Sequence[Any], int]] = (((), 0),), config: NoiseConfig = CONFIG
) -> Prepared:
    """``cells``: (key values, grouping id) of each engine row, 10 units each."""
    shape = shape_of(sql)
    plan = plan_of(shape, config)
    rows = [engine_row(plan, keys, gid) for keys, gid in cells]
    return prepare(shape, rows, plan.key_slots, plan.slots, plan.grouping_slot, config, SCOPE)


def all_keys(p: Prepared) -> set[str]:
    """Every key the answer gives: cells and grouped statistics."""
    return p.received_keys


def cell_keys(p: Prepared) -> set[str]:
    """The cache keys of the answer's cells (what draws are stored under)."""
    return {key for keys in p.cache_keys for key in keys.values()}


def draws(keys: set[str], value: float = 50.0) -> dict[str, Draw]:
    return {key: Draw(value, Fraction(1), Fraction(1), "hand-made") for key in keys}


def shares_by_label(p: Prepared) -> dict[tuple[str, tuple[str, ...]], Fraction]:
    return {(noisy.label, level): share for (noisy, level), share in p.shares.items()}


TOWNS = [(("Barnet",), 0), (("Camden",), 0), (("Enfield",), 0)]


# --- the ε split --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "average", "groups"),
    [
        ("SELECT COUNT(*) FROM hospital", "ratio", {("count(*)", ())}),
        (
            "SELECT COUNT(*), SUM(income), AVG(income) FROM hospital WHERE town = 'Enfield'",
            "ratio",
            {("count(*)", ()), ("sum(income)", ()), ("csum(income)", ()), ("count(income)", ())},
        ),
        (
            "SELECT AVG(income) FROM hospital",
            "clamped_mean",
            {("count(income)", ()), ("mean(income)", ())},
        ),
        # a GROUP BY thresholds on a count it releases anyway ...
        ("SELECT town, COUNT(*) FROM hospital GROUP BY town", "ratio", {("count(*)", ("town",))}),
        # ... or on a dedicated respondent count
        (
            "SELECT town, SUM(income) FROM hospital GROUP BY town",
            "ratio",
            {("sum(income)", ("town",)), ("units(*)", ("town",))},
        ),
        (
            "SELECT town, AVG(income) FROM hospital GROUP BY ROLLUP(town)",
            "ratio",
            {
                ("csum(income)", ("town",)),
                ("count(income)", ("town",)),
                ("csum(income)", ()),
                ("count(income)", ()),
            },
        ),
    ],
)
@pytest.mark.parametrize("epsilon", [Fraction(1), Fraction(1, 3), Fraction(7, 10)])
def test_epsilon_is_split_exactly_over_statistic_and_level(
    sql: str, average: str, groups: set[tuple[str, tuple[str, ...]]], epsilon: Fraction
) -> None:
    config = dataclasses.replace(CONFIG, epsilon=epsilon, average=average)
    shares = shares_by_label(prepared(sql, (), config))
    assert set(shares) == groups
    assert all(share == epsilon / len(groups) for share in shares.values())
    assert sum(shares.values(), Fraction(0)) == epsilon


def test_the_split_does_not_depend_on_the_rows() -> None:
    sql = "SELECT town, COUNT(*), SUM(income) FROM hospital GROUP BY ROLLUP(town)"
    many = prepared(sql, [*TOWNS, ((None,), 1)])
    none = prepared(sql, [])
    assert shares_by_label(many) == shares_by_label(none)


# --- costs --------------------------------------------------------------------------------

GROUPED = "SELECT town, COUNT(*), SUM(income) FROM hospital GROUP BY town"


def test_a_fully_cached_query_costs_nothing() -> None:
    p = prepared(GROUPED, TOWNS)
    known = all_keys(p)
    costs = p.costs(draws(known), set(known), {"team": set(known)})
    assert (costs.analyst, costs.fresh, dict(costs.groups)) == (
        Fraction(0),
        Fraction(0),
        {"team": Fraction(0)},
    )


def test_nothing_cached_costs_the_query_epsilon_in_every_account() -> None:
    p = prepared(GROUPED, TOWNS)
    costs = p.costs({}, set(), {"team": set(), "other": set()})
    assert (costs.analyst, costs.fresh, dict(costs.groups)) == (
        Fraction(1),
        Fraction(1),
        {"team": Fraction(1), "other": Fraction(1)},
    )


def test_a_grouped_level_is_paid_per_statistic_not_per_existing_cell() -> None:
    """Which cells a GROUP BY has depends on the data, so it must not decide the cost: a
    grouped statistic is paid once, by its group key, whatever cells are cached."""
    p = prepared(GROUPED, TOWNS)
    cells = {key for keys in p.cache_keys for key in keys.values()}
    groups = set(p.group_keys.values())
    # every cell drawn for someone, but this grouping never asked: the analyst pays all
    assert p.costs(draws(cells), set(cells), {}).analyst == 1
    # the grouping asked before: free, even with a cell missing from the cache
    assert p.costs({}, groups, {}).analyst == 0
    # one statistic's grouping asked before: the other statistic's share only
    count_group = next(key for (noisy, _), key in p.group_keys.items() if noisy.label == "count(*)")
    assert p.costs({}, {count_group}, {}).analyst == Fraction(1, 2)


def test_a_new_cell_costs_only_its_own_level() -> None:
    sql = "SELECT town, COUNT(*) FROM hospital GROUP BY ROLLUP(town)"
    p = prepared(sql, [*TOWNS, ((None,), 1)])
    total = next(keys for r, keys in enumerate(p.cache_keys) if p.levels[r] == ())
    known = all_keys(p) - set(total.values())
    assert shares_by_label(p) == {("count(*)", ("town",)): Fraction(1, 2), ("count(*)", ()): Fraction(1, 2)}
    assert p.costs(draws(known), known, {}).analyst == Fraction(1, 2)


def test_the_analyst_pays_what_they_have_not_received_the_global_account_what_was_never_drawn() -> None:
    p = prepared(GROUPED, TOWNS)
    known = all_keys(p)
    # drawn for someone else: the analyst pays, the data does not pay twice
    costs = p.costs(draws(known), set(), {"team": set(known), "solo": set()})
    assert (costs.analyst, costs.fresh) == (Fraction(1), Fraction(0))
    assert dict(costs.groups) == {"team": 0, "solo": 1}
    # what the analyst already received is free to them, whatever the cache says
    assert p.costs({}, set(known), {}).analyst == 0


def test_costs_read_the_cache_keys_not_the_sql_text() -> None:
    first = prepared("SELECT COUNT(*) FROM hospital WHERE town = 'Enfield'")
    again = prepared("SELECT COUNT(*) AS n FROM hospital WHERE town IN ('Enfield') AND town <> 'Camden'")
    grouped = prepared("SELECT town, COUNT(*) FROM hospital GROUP BY town", [(("Enfield",), 0)])
    assert cell_keys(first) == cell_keys(again) == cell_keys(grouped)
    assert again.costs(draws(all_keys(first)), all_keys(first), {}).analyst == 0
    other_scope = dataclasses.replace(CONFIG, rows_per_cell=2)
    bounded_otherwise = prepared("SELECT COUNT(*) FROM hospital WHERE town = 'Enfield'", config=other_scope)
    assert cell_keys(bounded_otherwise).isdisjoint(cell_keys(first))


def test_what_a_query_costs_does_not_depend_on_which_groups_exist() -> None:
    sql = "SELECT town, COUNT(*) FROM hospital WHERE town = 'Tiny' GROUP BY town"
    nobody = prepared(sql, [])
    somebody = prepared(sql, [(("Tiny",), 0)])  # one patient: its row is thresholded away
    assert nobody.costs({}, set(), {}).analyst == somebody.costs({}, set(), {}).analyst


# --- draws --------------------------------------------------------------------------------


def test_draw_draws_only_the_missing_keys() -> None:
    p = prepared("SELECT town, COUNT(*), AVG(income) FROM hospital GROUP BY town", TOWNS)
    known = cell_keys(p)
    cached = set(sorted(known)[::2])
    fresh = p.draw(draws(cached), InsecureSeededSource(1))
    assert set(fresh) == known - cached
    assert p.draw(draws(known), InsecureSeededSource(1)) == {}


def test_a_cached_statistic_is_answered_from_the_cache() -> None:
    p = prepared("SELECT COUNT(*), SUM(income) FROM hospital")
    (keys,) = p.cache_keys
    count_key = next(key for noisy, key in keys.items() if noisy.kind == "count")
    cached = {count_key: Draw(123.0, Fraction(1), Fraction(1), "hand-made")}
    fresh = p.draw(cached, InsecureSeededSource(3))
    assert count_key not in fresh
    assert p.answer(ChainMap(fresh, cached)).rows[0][0] == 123


def test_each_draw_records_its_group_share_and_scale() -> None:
    config = dataclasses.replace(CONFIG, cells_per_unit=2, rows_per_cell=3, epsilon=Fraction(1, 2))
    p = prepared("SELECT town, COUNT(*), SUM(income) FROM hospital GROUP BY town", TOWNS, config)
    fresh = p.draw({}, InsecureSeededSource(5))
    share = Fraction(1, 4)
    for keys in p.cache_keys:
        for noisy, key in keys.items():
            assert fresh[key].epsilon == share
            if noisy.kind == "count":
                assert fresh[key].scale == 6 / share  # geometric: Δ = c·m
            else:  # Laplace on a grid g <= Δ/1024: scale g·⌈Δ/g⌉/ε
                sensitivity = 6 * Fraction(int(HIGH))
                assert sensitivity / share <= fresh[key].scale < sensitivity * (1 + Fraction(1, 1024)) / share
            assert fresh[key].mechanism


def test_draws_are_reproducible_with_a_seeded_source() -> None:
    p = prepared("SELECT town, COUNT(*), SUM(income), AVG(income) FROM hospital GROUP BY town", TOWNS)
    first = p.draw({}, InsecureSeededSource(11))
    assert p.draw({}, InsecureSeededSource(11)) == first
    assert p.draw({}, InsecureSeededSource(12)) != first
    assert p.answer(first).rows == p.answer(dict(first)).rows


def test_a_clamped_mean_reads_the_released_count_of_its_cell() -> None:
    config = dataclasses.replace(CONFIG, average="clamped_mean")
    p = prepared("SELECT AVG(income) FROM hospital", config=config)
    (keys,) = p.cache_keys
    count_key = next(key for noisy, key in keys.items() if noisy.kind == "count")
    # the count is cached, the mean is not: the mean is drawn with the cached count
    fresh = p.draw({count_key: Draw(0.0, Fraction(1), Fraction(1), "hand-made")}, InsecureSeededSource(2))
    assert set(fresh) == set(keys.values()) - {count_key}
    (mean,) = fresh.values()
    assert LOW <= mean.value <= HIGH


# --- answers --------------------------------------------------------------------------------


def _gated(p: Prepared, counts: Mapping[str, float]) -> dict[str, Draw]:
    """Every statistic drawn as 50, each town's COUNT(*) as given."""
    drawn = draws(all_keys(p))
    for r, keys in enumerate(p.cache_keys):
        for noisy, key in keys.items():
            if noisy.label == "count(*)" and p.keys[r][0] in counts:
                drawn[key] = Draw(counts[p.keys[r][0]], Fraction(1), Fraction(1), "hand-made")
    return drawn


def test_rows_below_a_fixed_threshold_vanish_and_the_note_names_tau_and_delta() -> None:
    config = dataclasses.replace(CONFIG, group_threshold=5)
    p = prepared("SELECT town, COUNT(*) FROM hospital GROUP BY town", TOWNS, config)
    result = p.answer(_gated(p, {"Barnet": 10, "Camden": 4, "Enfield": 5}))
    assert result.rows == [["Barnet", 10], ["Enfield", 5]]
    assert result.flags == [["released", "noised"]] * 2
    delta = group_threshold_delta(5, Fraction(1), ContributionBounds(1, 1))  # scale Δ/ε = 1
    note = next(n for n in result.notes if "shown only when" in n)
    assert "rows grouped by town" in note and "at least 5 " in note and f"(δ ≤ {delta:.2g})" in note


def test_the_automatic_threshold_is_the_smallest_with_delta_at_most_the_target() -> None:
    config = dataclasses.replace(CONFIG, cells_per_unit=2, rows_per_cell=3, delta=1e-9)
    p = prepared("SELECT town, COUNT(*), SUM(income) FROM hospital GROUP BY town", TOWNS, config)
    scale = Fraction(2 * 3) / Fraction(1, 2)  # COUNT(*) is one of two groups
    tau = automatic_threshold(scale, ContributionBounds(2, 3), 1e-9)
    result = p.answer(_gated(p, {"Barnet": tau, "Camden": tau - 1, "Enfield": tau + 40}))
    assert [row[0] for row in result.rows] == ["Barnet", "Enfield"]
    delta = group_threshold_delta(tau, scale, ContributionBounds(2, 3))
    assert any(f"at least {tau} (δ ≤ {delta:.2g})" in note for note in result.notes)
    assert any("at most 3 rows per cell and 2 cells per grouping level" in note for note in result.notes)


def test_a_sum_only_group_by_is_thresholded_on_respondents_with_m_1() -> None:
    config = dataclasses.replace(CONFIG, rows_per_cell=4)
    p = prepared("SELECT town, SUM(income) FROM hospital GROUP BY town", TOWNS, config)
    scale = Fraction(1) / Fraction(1, 2)  # units: Δ = c · 1, one of two groups
    tau = automatic_threshold(scale, ContributionBounds(1, 1), CONFIG.delta)
    drawn = draws(all_keys(p))
    for keys in p.cache_keys:
        for noisy, key in keys.items():
            if noisy.kind == "units":
                drawn[key] = Draw(float(tau - 1), Fraction(1), Fraction(1), "hand-made")
    assert p.answer(drawn).rows == []
    assert any(f"at least {tau} " in note for note in p.answer(drawn).notes)


def test_totals_of_a_rollup_are_never_thresholded() -> None:
    config = dataclasses.replace(CONFIG, group_threshold=5)
    p = prepared("SELECT town, COUNT(*) FROM hospital GROUP BY ROLLUP(town)", [*TOWNS, ((None,), 1)], config)
    drawn = _gated(p, {"Barnet": 1, "Camden": 1, "Enfield": 1})
    total = next(keys for r, keys in enumerate(p.cache_keys) if p.levels[r] == ())
    drawn.update(draws(set(total.values()), 0.0))
    assert p.answer(drawn).rows == [[None, 0]]


def test_an_average_is_the_centred_sum_over_the_count_clamped_into_the_bounds() -> None:
    p = prepared("SELECT AVG(income), COUNT(income) FROM hospital")
    (keys,) = p.cache_keys

    def drawn(csum: float, count: float) -> dict[str, Draw]:
        value = {"csum": csum, "count": count}
        return {
            key: Draw(value[noisy.kind], Fraction(1), Fraction(1), "hand-made") for noisy, key in keys.items()
        }

    mid = (LOW + HIGH) / 2
    assert p.answer(drawn((5000 - mid) * 4, 4)).rows == [[5000.0, 4]]
    assert p.answer(drawn(-mid * 4, 4)).rows == [[LOW, 4]]  # below L: clamped
    assert p.answer(drawn(1e9, 0)).rows == [[HIGH, 0]]  # no count: divided by 1, clamped


def test_answer_keeps_earlier_notes_first_and_states_each_scale() -> None:
    p = prepared("SELECT COUNT(*), SUM(income) FROM hospital")
    result = p.answer(p.draw({}, InsecureSeededSource(4)), ["budget line"])
    assert result.notes[0] == "budget line"
    assert any(n.startswith("count(*): noisy count (geometric), scale 2") for n in result.notes)
    assert any("values clamped to [1000, 100000]" in n for n in result.notes)
    assert not any("shown only when" in n for n in result.notes)


# --- the automatic threshold ---------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.fractions(min_value=Fraction(1, 10), max_value=Fraction(200)),
    st.integers(1, 4),
    st.integers(1, 4),
    st.sampled_from([1e-3, 1e-6, 1e-9, 1e-12, 0.25]),
)
def test_automatic_threshold_is_the_smallest_tau_with_delta_at_most_the_target(
    scale: Fraction, c: int, m: int, target: float
) -> None:
    bounds = ContributionBounds(c, m)
    tau = automatic_threshold(scale, bounds, target)
    assert tau > m
    assert group_threshold_delta(tau, scale, bounds) <= target
    if tau - 1 > m:
        assert group_threshold_delta(tau - 1, scale, bounds) > target
