"""Contribution bounding in the engine (``noisy_rewrite``) against an independent pandas oracle.

Per (cell, unit): n rows, n_col non-NULL values, s the sum of values clamped to [L, U].
The unit contributes min(n, m) to COUNT(*), min(n_col, m) to COUNT(col) and
s · min(n_col, m) / n_col to SUM(col); per grouping level it reaches at most c cells,
chosen by a keyed hash the oracle cannot know, so with c below a unit's cells the tests
check invariants instead of values.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest

from guard.backends.base import TableInfo
from guard.backends.duckdb_backend import DuckDBBackend
from guard.plan.noisy import NoisyPlan, Statistic, noisy_rewrite
from guard.policy.load import load_policy
from guard.policy.model import Policy
from guard.query.analyze import analyze
from guard.query.parse import parse
from guard.query.shape import QueryShape
from guard.query.validate import validate

LOW, HIGH = -50.0, 200.0
BOUNDS = {"amount": (LOW, HIGH)}
STATISTICS = (
    Statistic("units"),
    Statistic("count"),
    Statistic("count", "amount"),
    Statistic("sum", "amount"),
)
SALT = 12345

Row = tuple[str, int, str | None, str, float | None]
#: level -> cell key -> (units, count(*), count(amount), sum(amount) or None)
Cells = dict[tuple[str, ...], dict[tuple[Any, ...], tuple[float, float, float, float | None]]]

POLICY = """\
name: bounded
tables:
  visits:
    source: {{csv: {csv}}}
    privacy_unit: pid
    columns:
      pid: {{role: identifier}}
      pdim: {{role: dimension, description: the unit id again (to see per-unit cells)}}
      town: {{role: dimension}}
      ward: {{role: dimension}}
      amount: {{role: measure, bounds: [{low}, {high}]}}
analysts:
  alice: {{}}
"""


def panel(seed: int, units: int = 24, most: int = 7) -> list[Row]:
    """Units with 1..``most`` rows each over several towns and wards; NULL towns and
    amounts, amounts outside [L, U]."""
    rng = random.Random(seed)
    rows: list[Row] = []
    for u in range(units):
        for _ in range(rng.randint(1, most)):
            town = rng.choice(["A", "A", "B", "C", "D", None])
            amount = rng.choice([None, -120.0, LOW, 0.0, 7.5, HIGH, 350.0, float(rng.randint(-60, 210))])
            rows.append((f"U{u:03d}", u, town, rng.choice(["x", "y"]), amount))
    return rows


def one_row_each(seed: int, units: int = 40) -> list[Row]:
    rng = random.Random(seed)
    rows: list[Row] = []
    for u in range(units):
        town = rng.choice(["A", "B", "C", None])
        amount = rng.choice([None, -70.0, 3.0, 120.5, 999.0, float(rng.randint(-50, 200))])
        rows.append((f"U{u:03d}", u, town, rng.choice(["x", "y"]), amount))
    return rows


PANEL = panel(3)
ONE_ROW_EACH = one_row_each(1)


@dataclass
class Engine:
    policy: Policy
    backend: DuckDBBackend
    info: TableInfo
    frame: pd.DataFrame

    def shape(self, sql: str) -> QueryShape:
        select, table = validate(parse(sql, self.policy.limits), self.policy.tables)
        return analyze(select, table, self.info.types, self.policy.limits)

    def run(self, sql: str, *, c: int, m: int, salt: int = SALT) -> tuple[QueryShape, Cells]:
        shape = self.shape(sql)
        plan = noisy_rewrite(
            shape, self.info, STATISTICS, BOUNDS, cells_per_unit=c, rows_per_cell=m, salt=salt
        )
        return shape, cells_of(shape, plan, self.backend.execute(plan.query).rows)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[list[Row]], Engine]]:
    """An engine over ``rows`` (a snapshot is built once per data set and module)."""
    opened: dict[tuple[Row, ...], Engine] = {}

    def open_(rows: list[Row]) -> Engine:
        if tuple(rows) in opened:
            return opened[tuple(rows)]
        folder = tmp_path_factory.mktemp("data")
        csv = folder / "visits.csv"
        lines = ["pid,pdim,town,ward,amount"]
        lines += [",".join("" if v is None else str(v) for v in row) for row in rows]
        csv.write_text("\n".join(lines) + "\n")
        path = folder / "policy.yaml"
        path.write_text(POLICY.format(csv=csv, low=LOW, high=HIGH))
        policy = load_policy(path, folder / "state")
        backend = DuckDBBackend(policy)
        frame = pd.DataFrame(rows, columns=["pid", "pdim", "town", "ward", "amount"]).astype(
            {"town": object, "amount": float}
        )
        opened[tuple(rows)] = Engine(policy, backend, backend.table_info("visits"), frame)
        return opened[tuple(rows)]

    yield open_
    for db in opened.values():
        db.backend.close()


def cells_of(shape: QueryShape, plan: NoisyPlan, rows: Sequence[Sequence[Any]]) -> Cells:
    """The engine's rows by grouping level and cell key (the level's key values)."""
    out: Cells = {level: {} for level in shape.levels}
    n = len(shape.group_by)
    for row in rows:
        gid = 0 if plan.grouping_slot is None else int(row[plan.grouping_slot])
        level = tuple(k for i, k in enumerate(shape.group_by) if not gid >> (n - 1 - i) & 1)
        values = dict(zip(shape.group_by, (row[s] for s in plan.key_slots), strict=True))
        key = tuple(values[k] for k in level)
        assert key not in out[level], f"cell {key} of level {level} twice"
        stats = tuple(row[plan.slots[s]] for s in STATISTICS)
        out[level][key] = (stats[0], stats[1], stats[2], stats[3])
    return out


# --- the oracle ---------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if isinstance(value, np.generic) else value


def per_unit(frame: pd.DataFrame, level: tuple[str, ...], m: int) -> pd.DataFrame:
    """One row per (cell, unit) with the unit's kept count, count(amount) and sum."""
    d = frame.assign(clamped=frame["amount"].clip(LOW, HIGH))
    per = (
        d.groupby([*level, "pid"], dropna=False)
        .agg(n=("pdim", "size"), n_col=("amount", "count"), s=("clamped", "sum"))
        .reset_index()
    )
    per["k_count"] = per["n"].clip(upper=m)
    per["k_ncol"] = per["n_col"].clip(upper=m)
    share = per["k_ncol"] / per["n_col"].where(per["n_col"] > 0)
    per["k_sum"] = per["s"] * share
    return per


def oracle(frame: pd.DataFrame, level: tuple[str, ...], m: int) -> dict[tuple[Any, ...], tuple[float, ...]]:
    """Every cell of ``level`` with every unit's bounded contribution (no L0 bound)."""
    per = per_unit(frame, level, m)
    out: dict[tuple[Any, ...], tuple[float, ...]] = {}
    groups = per.groupby(list(level), dropna=False) if level else [((), per)]
    for key, part in groups:
        cell = tuple(_plain(k) for k in (key if isinstance(key, tuple) else (key,)))
        total = part["k_sum"].sum(min_count=1)
        out[cell] = (len(part), part["k_count"].sum(), part["k_ncol"].sum(), _plain(total))
    return out


def assert_cells_equal(actual: dict[tuple[Any, ...], tuple[Any, ...]], expected: dict[Any, Any]) -> None:
    assert set(actual) == set(expected)
    for key, (units, count, count_col, total) in expected.items():
        got = actual[key]
        assert got[:3] == (units, count, count_col), key
        if total is None:
            assert got[3] is None, key
        else:
            assert got[3] == pytest.approx(total, rel=1e-9, abs=1e-9), key


QUERIES: list[tuple[str, Callable[[pd.DataFrame], Any]]] = [
    ("SELECT town, COUNT(*), COUNT(amount), SUM(amount) FROM visits GROUP BY town", lambda f: f.index >= 0),
    (
        "SELECT town, ward, SUM(amount) FROM visits WHERE ward = 'x' GROUP BY town, ward",
        lambda f: f["ward"] == "x",
    ),
    ("SELECT COUNT(*), SUM(amount) FROM visits", lambda f: f.index >= 0),
    ("SELECT COUNT(*) FROM visits WHERE town IN ('A', 'B')", lambda f: f["town"].isin(["A", "B"])),
    (
        "SELECT town, ward, COUNT(*) FROM visits GROUP BY ROLLUP(town, ward)",
        lambda f: f.index >= 0,
    ),
    (
        "SELECT ward, town, AVG(amount) FROM visits WHERE town IS NOT NULL GROUP BY CUBE(ward, town)",
        lambda f: f["town"].notna(),
    ),
]


@pytest.mark.parametrize(
    ("statistics", "c", "m", "message"),
    [
        (STATISTICS, 0, 1, "contribution bounds must be >= 1"),
        (STATISTICS, 1, 0, "contribution bounds must be >= 1"),
        ((Statistic("sum", "ward"),), 1, 1, r"sum\(ward\) needs the column's declared bounds"),
        ((Statistic("sum"),), 1, 1, r"sum\(\*\) needs the column's declared bounds"),
    ],
)
def test_rewrite_refuses_what_it_cannot_bound(
    engine: Callable[[list[Row]], Engine], statistics: tuple[Statistic, ...], c: int, m: int, message: str
) -> None:
    db = engine(PANEL)
    shape = db.shape("SELECT town, COUNT(*) FROM visits GROUP BY town")
    with pytest.raises(ValueError, match=message):
        noisy_rewrite(shape, db.info, statistics, BOUNDS, cells_per_unit=c, rows_per_cell=m, salt=SALT)


# --- one row per unit: the fast path ------------------------------------------------------


@pytest.mark.parametrize(("sql", "where"), QUERIES)
def test_one_row_per_unit_statistics_are_the_clamped_aggregates(
    engine: Callable[[list[Row]], Engine], sql: str, where: Callable[[pd.DataFrame], Any]
) -> None:
    db = engine(ONE_ROW_EACH)
    assert db.info.one_row_per_unit
    shape, cells = db.run(sql, c=1, m=1)
    frame = db.frame[where(db.frame)]
    for level in shape.levels:
        assert_cells_equal(cells[level], oracle(frame, level, m=1))


def test_one_row_per_unit_ignores_the_bounds_it_cannot_reach(engine: Callable[[list[Row]], Engine]) -> None:
    db = engine(ONE_ROW_EACH)
    _, first = db.run(QUERIES[4][0], c=1, m=1)
    _, other = db.run(QUERIES[4][0], c=3, m=5, salt=1)
    assert first == other


# --- panel data ---------------------------------------------------------------------------


@pytest.mark.parametrize("m", [1, 3])
@pytest.mark.parametrize(("sql", "where"), QUERIES)
def test_panel_statistics_with_every_cell_kept_equal_the_oracle(
    engine: Callable[[list[Row]], Engine], sql: str, where: Callable[[pd.DataFrame], Any], m: int
) -> None:
    db = engine(PANEL)
    assert not db.info.one_row_per_unit
    most_cells = 7  # no unit has more rows, so none has more cells at any level
    shape, cells = db.run(sql, c=most_cells, m=m)
    frame = db.frame[where(db.frame)]
    for level in shape.levels:
        assert_cells_equal(cells[level], oracle(frame, level, m=m))


def test_rows_beyond_m_count_as_m_times_the_mean(engine: Callable[[list[Row]], Engine]) -> None:
    # one unit, three rows in one cell, one of them NULL: with m = 1 its count is 1, its
    # count(amount) 1 and its sum the mean of its two clamped values
    rows: list[Row] = [("U1", 1, "A", "x", 300.0), ("U1", 1, "A", "x", 100.0), ("U1", 1, "A", "x", None)]
    rows += [("U2", 2, "A", "x", -80.0)]
    db = engine(rows)
    _, cells = db.run("SELECT town, COUNT(*), SUM(amount) FROM visits GROUP BY town", c=1, m=1)
    ((key, (units, count, count_col, total)),) = cells[("town",)].items()
    assert (key, units, count, count_col) == (("A",), 2, 2, 2)
    assert total == pytest.approx((200 + 100) / 2 - 50)
    _, cells = db.run("SELECT town, COUNT(*), SUM(amount) FROM visits GROUP BY town", c=1, m=2)
    ((key, (units, count, count_col, total)),) = cells[("town",)].items()
    assert (key, units, count, count_col) == (("A",), 2, 3, 3)
    assert total == pytest.approx(200 + 100 - 50)


@pytest.mark.parametrize("c", [1, 2])
@pytest.mark.parametrize("m", [1, 3])
@pytest.mark.parametrize(("sql", "where"), [QUERIES[0], QUERIES[1], QUERIES[4]])
def test_each_unit_keeps_at_most_c_cells_per_level(
    engine: Callable[[list[Row]], Engine],
    sql: str,
    where: Callable[[pd.DataFrame], Any],
    c: int,
    m: int,
) -> None:
    db = engine(PANEL)
    shape, cells = db.run(sql, c=c, m=m)
    frame = db.frame[where(db.frame)]
    for level in shape.levels:
        per = per_unit(frame, level, m)
        full = oracle(frame, level, m)
        kept = cells[level]
        assert set(kept) <= set(full)
        # the number of (unit, cell) pairs kept: every unit keeps min(c, its cells)
        cells_per_unit = per.groupby("pid").size()
        assert sum(v[0] for v in kept.values()) == cells_per_unit.clip(upper=c).sum()
        # a cell keeps a subset of its units
        for key, (units, count, count_col, _) in kept.items():
            assert units <= full[key][0] and count <= full[key][1] and count_col <= full[key][2]
        # the level's total count lies between every unit keeping its smallest and its
        # largest c cells
        ranked = per.sort_values(["pid", "k_count"])
        smallest = ranked.groupby("pid")["k_count"].apply(lambda s: s.head(c).sum()).sum()
        largest = ranked.groupby("pid")["k_count"].apply(lambda s: s.tail(c).sum()).sum()
        assert smallest <= sum(v[1] for v in kept.values()) <= largest


@pytest.mark.parametrize("c", [1, 2])
@pytest.mark.parametrize("m", [1, 2])
def test_the_kept_cells_of_each_unit(engine: Callable[[list[Row]], Engine], c: int, m: int) -> None:
    # grouped by the unit's id too, every cell is one unit's: which cells it keeps is
    # visible, and each kept cell is exactly that unit's bounded contribution
    db = engine(PANEL)
    _, cells = db.run("SELECT pdim, town, COUNT(*) FROM visits GROUP BY ROLLUP(pdim, town)", c=c, m=m)
    detail = ("pdim", "town")
    full = oracle(db.frame, detail, m)
    for unit in db.frame["pdim"].unique():
        mine = {k: v for k, v in cells[detail].items() if k[0] == unit}
        theirs = {k: v for k, v in full.items() if k[0] == unit}
        assert len(mine) == min(c, len(theirs)), unit
        assert_cells_equal(mine, {k: theirs[k] for k in mine})
        assert all(v[0] == 1 for v in mine.values())
        assert sum(v[1] for v in mine.values()) <= c * m
        assert sum(v[2] for v in mine.values()) <= c * m
        assert sum(abs(v[3] or 0) for v in mine.values()) <= c * m * max(abs(LOW), abs(HIGH))
    # one cell per unit at level (pdim), one cell at the grand total: nothing is dropped
    assert_cells_equal(cells[("pdim",)], oracle(db.frame, ("pdim",), m))
    assert_cells_equal(cells[()], oracle(db.frame, (), m))


def test_the_kept_cells_are_fixed_by_the_salt(engine: Callable[[list[Row]], Engine]) -> None:
    db = engine(PANEL)
    sql = "SELECT pdim, town, COUNT(*) FROM visits GROUP BY pdim, town"
    _, first = db.run(sql, c=1, m=1, salt=1)
    _, again = db.run(sql, c=1, m=1, salt=1)
    assert first == again
    others = [db.run(sql, c=1, m=1, salt=salt)[1] for salt in range(2, 7)]
    assert any(set(other[("pdim", "town")]) != set(first[("pdim", "town")]) for other in others)


@pytest.mark.parametrize("rows", [PANEL, ONE_ROW_EACH], ids=["panel", "one-row-per-unit"])
def test_a_where_that_selects_no_row_gives_one_row_of_zeros(
    engine: Callable[[list[Row]], Engine], rows: list[Row]
) -> None:
    db = engine(rows)
    _, cells = db.run("SELECT COUNT(*), SUM(amount) FROM visits WHERE town = 'Nowhere'", c=1, m=1)
    units, count, count_col, total = cells[()][()]
    assert units == 0 and total is None
    assert (count or 0, count_col or 0) == (0, 0)
    _, grouped = db.run("SELECT town, COUNT(*) FROM visits WHERE town = 'Nowhere' GROUP BY town", c=1, m=1)
    assert grouped == {("town",): {}}


def test_panel_counts_of_an_empty_selection_are_zero_not_null(engine: Callable[[list[Row]], Engine]) -> None:
    db = engine(PANEL)
    _, cells = db.run("SELECT COUNT(*), SUM(amount) FROM visits WHERE town = 'Nowhere'", c=1, m=1)
    assert cells[()][()] == (0, 0, 0, None)


def test_the_grand_total_of_a_rollup_exists_whatever_the_data(engine: Callable[[list[Row]], Engine]) -> None:
    sql = "SELECT town, COUNT(*) FROM visits WHERE town = 'Nowhere' GROUP BY ROLLUP(town)"
    fast = engine(ONE_ROW_EACH).run(sql, c=1, m=1)[1]
    assert fast == {("town",): {}, (): {(): (0, 0, 0, None)}}
    # on panel data the engine has no row for an empty grand total (the outer GROUP BY
    # over no unit): NoiseStage.measure adds it (tests/noise/test_noise_mode.py)
    bounded = engine(PANEL).run(sql, c=1, m=1)[1]
    assert bounded == {("town",): {}, (): {}}


# --- sensitivity: one unit more or less -----------------------------------------------------


def _l1(first: dict[Any, tuple[Any, ...]], second: dict[Any, tuple[Any, ...]], index: int) -> float:
    return float(
        sum(
            abs((first.get(k, (0, 0, 0, 0))[index] or 0) - (second.get(k, (0, 0, 0, 0))[index] or 0))
            for k in set(first) | set(second)
        )
    )


def _check_sensitivity(with_unit: Cells, without: Cells, c: int, m: int) -> None:
    for level, cells in with_unit.items():
        assert _l1(cells, without[level], 0) <= c, level
        assert _l1(cells, without[level], 1) <= c * m, level
        assert _l1(cells, without[level], 2) <= c * m, level
        assert _l1(cells, without[level], 3) <= c * m * max(abs(LOW), abs(HIGH)) + 1e-6, level


SENSITIVITY_QUERIES = [
    "SELECT town, COUNT(*), SUM(amount) FROM visits GROUP BY town",
    "SELECT town, ward, COUNT(*), SUM(amount) FROM visits GROUP BY ROLLUP(town, ward)",
    "SELECT COUNT(*), SUM(amount) FROM visits WHERE ward = 'y'",
]


@pytest.mark.parametrize("sql", SENSITIVITY_QUERIES)
@pytest.mark.parametrize(("c", "m"), [(1, 1), (2, 3)])
def test_removing_the_last_unit_moves_each_level_by_at_most_the_sensitivity(
    engine: Callable[[list[Row]], Engine], sql: str, c: int, m: int
) -> None:
    rows = PANEL
    last = max(r[0] for r in rows)
    with_unit = engine(rows).run(sql, c=c, m=m)[1]
    without = engine([r for r in rows if r[0] != last]).run(sql, c=c, m=m)[1]
    _check_sensitivity(with_unit, without, c, m)


@pytest.mark.parametrize("sql", SENSITIVITY_QUERIES)
def test_removing_a_unit_from_one_row_per_unit_data(engine: Callable[[list[Row]], Engine], sql: str) -> None:
    rows = ONE_ROW_EACH
    with_unit = engine(rows).run(sql, c=1, m=1)[1]
    without = engine(rows[:7] + rows[8:]).run(sql, c=1, m=1)[1]
    _check_sensitivity(with_unit, without, 1, 1)


def test_removing_the_first_unit_moves_each_level_by_at_most_the_sensitivity(
    engine: Callable[[list[Row]], Engine],
) -> None:
    rows = PANEL
    first = min(r[0] for r in rows)
    sql = SENSITIVITY_QUERIES[0]
    with_unit = engine(rows).run(sql, c=1, m=1)[1]
    without = engine([r for r in rows if r[0] != first]).run(sql, c=1, m=1)[1]
    _check_sensitivity(with_unit, without, 1, 1)
