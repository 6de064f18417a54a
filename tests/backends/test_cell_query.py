"""The cell query (rewrite → DuckDB → cells) against a brute-force pandas computation.

Two tables of one policy: ``flat`` has one row per person (the engine counts rows),
``panel`` several rows per person (the engine sums each person's rows inside each cell
first). Both have NULL and negative measure values, persons whose values are all NULL,
and NULL dimension values (so a NULL key and a rolled-up key must be told apart), an
integer key holding 0 and NULL (MAX_JOIN's join stand-in for NULL), and tied amounts. For
every query, with and without grouping sets, at contribution depth 0 and 3, each cell's
value, unit counts, top contributions and magnitude must equal what pandas computes from
the definition, and the rows must come in key order (NULLS LAST), then grouping id.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from sqlglot import ErrorLevel

from guard import Guard
from guard.backends.base import DUCKDB_CAPABILITIES, Capabilities, KeyedHash, TopN
from guard.cells import Cell, CellGrid, cells_from_result
from guard.plan.rewrite import Plan, rewrite
from guard.query.analyze import analyze
from guard.query.parse import parse
from guard.query.shape import AggFunc, QueryShape
from guard.query.validate import validate

DIMENSIONS = ("region", "sector", "year", "zone")


def _people(rng: np.random.Generator, persons: int, max_rows: int) -> pd.DataFrame:
    rows = []
    for p in range(persons):
        silent = p % 11 == 0  # some persons never have an amount
        for r in range(int(rng.integers(1, max_rows + 1))):
            # persons move between regions and sectors over the years; region W holds
            # silent persons only, and "" is a NULL region
            region = "W" if silent and r == 0 else rng.choice(["N", "S", "E", ""], p=[0.4, 0.3, 0.2, 0.1])
            rows.append(
                {
                    "pid": f"u{p:03d}",
                    "region": region,
                    "sector": rng.choice(["a", "b", "c"]),
                    "year": 2020 + r,
                    "zone": (0, 1, None)[p % 3],  # 0 is MAX_JOIN's stand-in for a NULL key
                    "amount": None if silent or rng.random() < 0.2 else int(rng.integers(-40, 150)),
                    "score": None if rng.random() < 0.1 else round(float(rng.normal(10, 5)), 2),
                }
            )
    frame = pd.DataFrame(rows)
    frame["region"] = frame["region"].where(frame["region"] != "", None)
    frame["amount"] = frame["amount"].astype("Int64")
    frame["zone"] = frame["zone"].astype("Int64")
    # equal contributions, so top lists hold ties
    person = frame["pid"].str[1:].astype(int)
    for modulo, value in ((3, 149), (5, 120)):
        frame.loc[(person % 7 == modulo) & frame["amount"].notna(), "amount"] = value
    return frame


@dataclass(frozen=True)
class Data:
    guard: Guard
    frames: dict[str, pd.DataFrame]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Data]:
    folder = tmp_path_factory.mktemp("cells")
    rng = np.random.default_rng(20240601)
    frames = {"flat": _people(rng, 60, 1), "panel": _people(rng, 45, 4)}
    columns = {
        "pid": {"role": "identifier"},
        **{d: {"role": "dimension"} for d in DIMENSIONS},
        "amount": {"role": "measure", "bounds": [-50, 200]},
        "score": {"role": "measure", "bounds": [-50, 50]},
    }
    tables = {}
    for name, frame in frames.items():
        frame.to_csv(folder / f"{name}.csv", index=False)
        tables[name] = {"source": {"csv": f"{name}.csv"}, "privacy_unit": "pid", "columns": columns}
    policy = {
        "name": "cells",
        "protection": {"min_query_set_size": 3},
        "tables": tables,
        "analysts": {"alice": {}},
    }
    (folder / "cells.yaml").write_text(yaml.safe_dump(policy))
    with Guard.open(folder / "cells.yaml", state=folder / "state") as guard:
        yield Data(guard, frames)


def test_tables(data: Data) -> None:
    flat, panel = (data.guard.backend.table_info(t) for t in ("flat", "panel"))
    assert flat.one_row_per_unit and not panel.one_row_per_unit
    assert panel.rows > panel.units
    assert data.guard.backend.table_info("flat").types["amount"] == "BIGINT"


def _shape(data: Data, sql: str) -> QueryShape:
    policy = data.guard.policy
    select, table = validate(parse(sql, policy.limits), policy.tables)
    return analyze(select, table, data.guard.backend.table_info(table.name).types, policy.limits)


#: DuckDB as an engine without a top-n aggregate or list functions (PostgreSQL's and
#: Spark's query template, run where a brute-force check is at hand)
RANKED = Capabilities(dialect="duckdb", top_n=TopN.WINDOW, list_merge=False, keyed_hash=KeyedHash.VARIADIC)
#: the same engine with PostgreSQL's and Spark's other template (MAX and joins)
MAX_JOIN = dataclasses.replace(RANKED, top_n=TopN.MAX_JOIN)
CAPABILITIES = {"native": DUCKDB_CAPABILITIES, "ranked": RANKED, "maxjoin": MAX_JOIN}


def _run(
    data: Data, sql: str, depth: int, capabilities: Capabilities = DUCKDB_CAPABILITIES
) -> tuple[QueryShape, Plan, CellGrid]:
    shape = _shape(data, sql)
    info = data.guard.backend.table_info(shape.table)
    plan = rewrite(shape, info, depth=depth, capabilities=capabilities)
    grid = cells_from_result(shape, plan, data.guard.backend.execute(plan.query), info)
    return shape, plan, grid


# --- brute force ---------------------------------------------------------------------


def _expected_cell(rows: pd.DataFrame, func: AggFunc, column: str | None, depth: int) -> dict[str, Any]:
    """One cell from its definition: rows of the cell, contributions summed per person."""
    read = rows if column is None else rows[rows[column].notna()]
    units = read["pid"].nunique()
    if column is None:
        return {"value": len(rows), "units": units, "top": (), "magnitude": None}
    values = read[column]
    value: Any
    if func is AggFunc.COUNT:
        value = len(values)
    elif func is AggFunc.SUM:
        value = values.sum() if len(values) else None
    else:
        value = values.mean() if len(values) else None
    if func is AggFunc.COUNT or depth == 0:
        return {"value": value, "units": units, "top": (), "magnitude": None}
    per_person = read.groupby("pid")[column].sum().abs()  # persons with a value only
    top = tuple(sorted(per_person, reverse=True)[:depth])
    return {"value": value, "units": units, "top": top, "magnitude": float(per_person.sum())}


def _expected(data: Data, shape: QueryShape, depth: int) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """Cells keyed by (key values, rolled-up flags), over every grouping set."""
    frame = data.frames[shape.table]
    for p in shape.predicates:  # the test queries use =, IN and >= only
        if p.op.value == "in":
            frame = frame[frame[p.column].isin(p.values)]
        else:
            assert p.op.value == ">="
            frame = frame[frame[p.column] >= p.values[0]]
    cells = {}
    for level in shape.levels:
        groups = frame.groupby(list(level), dropna=False) if level else [((), frame)]
        for values, rows in groups:
            found = dict(zip(level, values if isinstance(values, tuple) else (values,), strict=True))
            key = tuple(_plain(found.get(k)) for k in shape.group_by)
            rolled = tuple(k not in level for k in shape.group_by)
            cells[key, rolled] = [_expected_cell(rows, a.func, a.column, depth) for a in shape.aggregates]
    return cells


def _plain(value: Any) -> Any:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if isinstance(value, np.generic) else value


def _same(got: Any, expected: Any) -> bool:
    if got is None or expected is None:
        return got is None and expected is None
    return math.isclose(float(got), float(expected), rel_tol=1e-9, abs_tol=1e-9)


def _check(data: Data, sql: str, depth: int, capabilities: Capabilities = DUCKDB_CAPABILITIES) -> CellGrid:
    shape, _, grid = _run(data, sql, depth, capabilities)
    expected = _expected(data, shape, depth)
    got = dict(zip(zip(grid.keys, grid.rolled_up, strict=True), grid.cells, strict=True))
    assert len(got) == len(grid.keys), "a cell came back twice"
    assert set(got) == set(expected)
    for key, cells in expected.items():
        for cell, want in zip(got[key], cells, strict=True):
            assert isinstance(cell, Cell)
            assert _same(cell.value, want["value"]), (key, cell, want)
            assert cell.units == want["units"], (key, cell, want)
            assert len(cell.top) == len(want["top"]), (key, cell, want)
            assert all(_same(a, b) for a, b in zip(cell.top, want["top"], strict=True)), (key, cell, want)
            assert all(isinstance(v, float) for v in cell.top)
            assert _same(cell.magnitude, want["magnitude"]), (key, cell, want)
    # rows in key order, NULLS LAST, then grouping id (rolled-up keys come as NULL)
    order = [
        (*((k is None, k if k is not None else 0) for k in keys), rolled)
        for keys, rolled in zip(grid.keys, grid.rolled_up, strict=True)
    ]
    assert order == sorted(order)
    return grid


AGGREGATES = "COUNT(*), COUNT(amount), SUM(amount), AVG(amount), AVG(score), COUNT(score)"
QUERIES = [
    f"SELECT {AGGREGATES} FROM {{t}}",
    f"SELECT region, sector, {AGGREGATES} FROM {{t}} GROUP BY region, sector",
    f"SELECT region, sector, {AGGREGATES} FROM {{t}} GROUP BY ROLLUP (region, sector)",
    f"SELECT region, year, {AGGREGATES} FROM {{t}} GROUP BY CUBE (region, year)",
    f"SELECT {AGGREGATES} FROM {{t}} GROUP BY GROUPING SETS ((region), (sector, year), ())",
    f"SELECT {AGGREGATES} FROM {{t}} WHERE year >= 2021 GROUP BY sector, ROLLUP (region)",
    "SELECT sector, SUM(amount), COUNT(*) FROM {t} WHERE region IN ('N', 'S') GROUP BY CUBE (sector, year)",
    # integer sums only (MAX_JOIN ranks the per-unit partials of floating-point sums as
    # WINDOW does), an integer key with 0 and NULL
    "SELECT zone, region, COUNT(*), SUM(amount), AVG(amount) FROM {t} GROUP BY ROLLUP (zone, region)",
    "SELECT zone, SUM(amount) FROM {t} WHERE year >= 2021 GROUP BY zone",
]


@pytest.mark.parametrize("template", list(CAPABILITIES))
@pytest.mark.parametrize("depth", [0, 3])
@pytest.mark.parametrize("table", ["flat", "panel"])
@pytest.mark.parametrize("sql", QUERIES, ids=[q[:60] for q in QUERIES])
def test_cells_match_brute_force(data: Data, sql: str, table: str, depth: int, template: str) -> None:
    _check(data, sql.format(t=table), depth, CAPABILITIES[template])


@pytest.mark.parametrize("template", ["ranked", "maxjoin"])
@pytest.mark.parametrize("dialect", ["postgres", "spark"])
@pytest.mark.parametrize("table", ["flat", "panel"])
@pytest.mark.parametrize("sql", QUERIES, ids=[q[:60] for q in QUERIES])
def test_ranked_template_renders_in_each_dialect_without_approximation(
    data: Data, sql: str, table: str, dialect: str, template: str
) -> None:
    capabilities = dataclasses.replace(
        CAPABILITIES[template], dialect=dialect, single_key_grouping=dialect == "spark"
    )
    shape = _shape(data, sql.format(t=table))
    info = data.guard.backend.table_info(table)
    plan = rewrite(shape, info, depth=3, capabilities=capabilities)
    text = plan.query.sql(dialect=dialect, unsupported_level=ErrorLevel.RAISE).upper()
    summed = any(a.func is not AggFunc.COUNT for a in shape.aggregates)
    assert "ROW_NUMBER() OVER" in text or not summed
    if template == "ranked":
        assert "MAX(" not in text.replace("MAX(CASE", "").replace("MAX(IF(", "")
        return
    # a bound per cell, then a join (not over floating-point partial sums: see
    # test_max_join_passes); no top-n aggregate, no NULL-safe comparison that PostgreSQL
    # could not hash
    if summed and not (table == "panel" and "score" in sql):
        assert "LEAST(" in text and " JOIN " in text
    assert re.search(r"MAX\(ABS\([^()]*\), \d+\)", text) is None
    assert "DISTINCT FROM" not in text and "<=>" not in text


def test_max_join_passes(data: Data) -> None:
    """MAX_JOIN reads the rows themselves with one row per unit (no per-unit GROUP BY),
    per-unit partials otherwise; per-unit partials of floating-point sums are ranked as
    WINDOW ranks them (a second evaluation of a sum may differ in its last bit)."""

    def sql(query: str, table: str) -> str:
        shape = _shape(data, query.format(t=table))
        plan = rewrite(shape, data.guard.backend.table_info(table), depth=3, capabilities=MAX_JOIN)
        return data.guard.backend.sql(plan.query)

    flat = sql("SELECT region, SUM(amount), AVG(score) FROM {t} GROUP BY ROLLUP (region)", "flat")
    assert "_uid" in flat and '"_uid")' not in flat  # buckets by unit, never grouped by it
    assert "UNION ALL" in flat  # the rows as contributions to a cell of each set
    panel = sql("SELECT region, SUM(amount) FROM {t} GROUP BY region", "panel")
    assert 'GROUP BY "region", "_uid"' in panel and "LEAST(" in panel
    floating = sql("SELECT region, SUM(amount), AVG(score) FROM {t} GROUP BY region", "panel")
    assert "LEAST(" not in floating and "ROW_NUMBER() OVER" in floating


@pytest.mark.parametrize("template", ["ranked", "maxjoin"])
@pytest.mark.parametrize("depth", [1, 2, 5])
@pytest.mark.parametrize("table", ["flat", "panel"])
@pytest.mark.parametrize(
    "sql", QUERIES[1:3] + QUERIES[-2:], ids=[q[:40] for q in QUERIES[1:3] + QUERIES[-2:]]
)
def test_other_depths(data: Data, sql: str, table: str, depth: int, template: str) -> None:
    """Depth 1 (MAX_JOIN: the maximum, no second pass) and depths around a bucket's
    size: a cell with fewer units than ``depth`` has no bound."""
    _check(data, sql.format(t=table), depth, CAPABILITIES[template])


def test_max_join_with_key_types_unknown(data: Data) -> None:
    """Without a key's type there is no stand-in constant for NULL: the cells are matched
    with IS NOT DISTINCT FROM (exact, but PostgreSQL cannot hash it)."""
    sql = "SELECT zone, region, SUM(amount), AVG(amount) FROM flat GROUP BY ROLLUP (zone, region)"
    shape = _shape(data, sql)
    info = data.guard.backend.table_info("flat")
    blind = dataclasses.replace(
        info, types={k: v for k, v in info.types.items() if k not in ("zone", "region")}
    )
    plans = [rewrite(shape, i, depth=3, capabilities=MAX_JOIN) for i in (info, blind)]
    texts = [data.guard.backend.sql(p.query) for p in plans]
    assert "IS NOT DISTINCT FROM" not in texts[0] and "IS NOT DISTINCT FROM" in texts[1]
    grids = [cells_from_result(shape, p, data.guard.backend.execute(p.query), info) for p in plans]
    assert grids[0] == grids[1]  # and the first is checked by test_cells_match_brute_force


def test_totals_count_each_person_once(data: Data) -> None:
    """A person with rows in several regions is one contributor to the grand total, with
    the sum of their rows (not one contributor per region)."""
    frame = data.frames["panel"]
    movers = frame[frame["amount"].notna()].groupby("pid")["region"].nunique(dropna=False)
    assert (movers > 1).sum() >= 5  # the data has such persons
    _, _, grid = _run(data, "SELECT region, SUM(amount) FROM panel GROUP BY ROLLUP (region)", 3)
    total = grid.cells[grid.rolled_up.index((True,))][0]
    persons = frame[frame["amount"].notna()].groupby("pid")["amount"].sum()
    by_region = [c[0].units for c, r in zip(grid.cells, grid.rolled_up, strict=True) if not r[0]]
    assert total.units == len(persons) < sum(by_region)
    assert total.top == tuple(float(v) for v in sorted(persons.abs(), reverse=True)[:3])
    assert total.magnitude == float(persons.abs().sum())


def test_null_key_and_rolled_up_key_are_different_rows(data: Data) -> None:
    _, _, grid = _run(data, "SELECT region, COUNT(*) FROM flat GROUP BY ROLLUP (region)", 0)
    assert grid.keys[-2:] == ((None,), (None,))
    assert grid.rolled_up[-2:] == ((False,), (True,))


def test_plan_slots(data: Data) -> None:
    sql = (
        "SELECT region, COUNT(*), SUM(amount), AVG(amount), AVG(score) FROM panel "
        "GROUP BY CUBE (region, sector)"
    )
    shape = _shape(data, sql)
    info = data.guard.backend.table_info("panel")
    plan = rewrite(shape, info, depth=2)
    # SUM(amount) and AVG(amount) share one top list and one magnitude
    assert plan.top_slots[0] is None and plan.magnitude_slots[0] is None
    assert plan.top_slots[1] == plan.top_slots[2] != plan.top_slots[3]
    assert plan.magnitude_slots[1] == plan.magnitude_slots[2] != plan.magnitude_slots[3]
    assert plan.grouping_slot is not None
    assert len(set(plan.top_slots[1:]) | set(plan.magnitude_slots[1:]) | {plan.grouping_slot}) == 5
    text = data.guard.backend.sql(plan.query)
    assert "MAX(ABS(" in text and ", 2)" in text and "OVER" not in text
    assert "GROUPING SETS" in text and 'GROUPING("region", "sector")' in text
    plain = rewrite(shape, info)
    assert plain.top_slots == plain.magnitude_slots == (None,) * 4


def test_plain_group_by_has_no_grouping_id(data: Data) -> None:
    _, plan, grid = _run(data, "SELECT region, sector, COUNT(*) FROM flat GROUP BY region, sector", 0)
    assert plan.grouping_slot is None
    assert grid.rolled_up == ((False, False),) * len(grid.keys)
    assert "GROUPING" not in data.guard.backend.sql(plan.query)
    assert all(c.top == () and c.magnitude is None for row in grid.cells for c in row)


def test_grouping_id_bits(data: Data) -> None:
    """k1 is the most significant bit of the grouping id; 1 = rolled up."""
    _, plan, grid = _run(data, "SELECT COUNT(*) FROM flat GROUP BY CUBE (region, sector, year)", 0)
    assert plan.grouping_slot is not None
    rows = data.guard.backend.execute(plan.query).rows
    for row, rolled in zip(rows, grid.rolled_up, strict=True):
        gid = row[plan.grouping_slot]
        assert rolled == tuple(bool(gid & bit) for bit in (4, 2, 1))
    assert set(grid.rolled_up) == set(itertools.product((False, True), repeat=3))


def test_cell_without_values(data: Data) -> None:
    """A cell whose persons have only NULLs: no top contributions, magnitude 0."""
    for table in ("flat", "panel"):
        _, _, grid = _run(data, f"SELECT COUNT(*), SUM(amount) FROM {table} WHERE region = 'W'", 3)
        count, total = grid.cells[0]
        assert count.value > 0
        assert (total.value, total.units, total.top, total.magnitude) == (None, 0, (), 0.0)


def test_negative_depth() -> None:
    with pytest.raises(ValueError, match="depth must be >= 0"):
        rewrite(QueryShape("t", (), (), (), ()), None, depth=-1)  # type: ignore[arg-type]


def test_shapes_built_by_hand(data: Data) -> None:
    """Grouping sets from other code (not analyze): any order, repeated sets once."""
    shape = _shape(data, "SELECT region, sector, COUNT(*) FROM panel GROUP BY CUBE (region, sector)")
    info = data.guard.backend.table_info("panel")
    again = dataclasses.replace(
        shape, grouping_sets=((), ("sector", "region"), ("region",), ("region", "sector"))
    )
    plan = rewrite(again, info)
    grid = cells_from_result(again, plan, data.guard.backend.execute(plan.query), info)
    assert len(set(zip(grid.keys, grid.rolled_up, strict=True))) == len(grid.keys)
    assert {r for r in grid.rolled_up} == {(False, False), (False, True), (True, True)}
    with pytest.raises(ValueError, match="names keys not in group_by"):
        rewrite(dataclasses.replace(shape, grouping_sets=(("year",), ())), info)


def test_one_row_grouping_sets_roll_up_detail_cells(data: Data) -> None:
    """With one row per unit and a contribution depth, the detail cells are aggregated
    once and rolled up (top-n lists merged); at depth 0 the table is grouped directly."""
    shape = _shape(data, "SELECT region, SUM(amount) FROM flat GROUP BY CUBE (region, sector)")
    info = data.guard.backend.table_info("flat")
    deep, flat = (data.guard.backend.sql(rewrite(shape, info, depth=d).query) for d in (3, 0))
    assert "LIST_SLICE(LIST_SORT(FLATTEN(LIST(" in deep and 'GROUP BY "region", "sector")' in deep
    assert "FLATTEN" not in flat and "__cells" not in flat and "GROUPING SETS" in flat
