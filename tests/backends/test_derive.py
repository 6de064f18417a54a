"""Derived dimensions end to end on DuckDB: answers grouped by and filtered on a band, a
map and value labels equal pandas on the raw data (for released cells); ROLLUP over the
hierarchy gives its totals; small band cells are withheld; values list like any
dimension's; the snapshot checks what needs the data; a changed derivation is a new
data version."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from guard import Guard
from guard.errors import PolicyError
from guard.server.pgwire.catalog import CatalogDatabase, visible_tables
from tests.backends.derived_people import people_frame, with_reference, write_people

RAW = with_reference(people_frame())


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_people(tmp_path_factory.mktemp("derived"))


@pytest.fixture(scope="module")
def guard(policy: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guard]:
    """One guard for the module: its answers see each other's releases."""
    with Guard.open(policy, state=tmp_path_factory.mktemp("state")) as opened:
        yield opened


@pytest.fixture
def fresh(policy: Path, tmp_path: Path) -> Iterator[Guard]:
    """A guard with no earlier releases (a table's groupings protect each other: one
    released breakdown can make another one infeasible)."""
    with Guard.open(policy, state=tmp_path / "state") as opened:
        yield opened


def _released(result: Any, keys: int) -> dict[tuple[Any, ...], list[Any]]:
    """Released rows of an answer: key values -> aggregate values (None where withheld)."""
    out = {}
    for row, flags in zip(result.rows, result.flags, strict=True):
        values = [v if f == "released" else None for v, f in zip(row[keys:], flags[keys:], strict=True)]
        out[tuple(row[:keys])] = values
    return out


@pytest.mark.parametrize("key", ["age_band", "country", "health_label"])
def test_group_by_a_derived_dimension_equals_pandas(fresh: Guard, key: str) -> None:
    result = fresh.query(
        f"SELECT {key}, COUNT(*), SUM(income), AVG(income) FROM people GROUP BY {key}", "alice"
    )
    reference = RAW.groupby(key, dropna=False)["income"].agg(["count", "sum", "mean"])
    got = _released(result, 1)
    assert {k[0] for k in got} == {None if pd.isna(k) else k for k in reference.index}
    compared = 0
    for (value,), (count, total, mean) in got.items():
        want = reference.loc[value] if value is not None else reference[reference.index.isna()].iloc[0]
        for have, expected in ((count, want["count"]), (total, want["sum"]), (mean, want["mean"])):
            if have is not None:
                assert have == pytest.approx(expected)
                compared += 1
    assert compared >= 6


@pytest.mark.parametrize(
    ("where", "mask"),
    [
        ("age_band = '18-64'", RAW.age_band == "18-64"),
        ("country = 'DE' AND health_label <> 'poor'", (RAW.country == "DE") & (RAW.health_label != "poor")),
        ("health_label IN ('fair', 'good')", RAW.health_label.isin(["fair", "good"])),
        ("country <> 'UK'", RAW.country == "DE"),
        (
            "age_band IN ('0-17', '18-64') AND country = 'UK'",
            RAW.age_band.isin(["0-17", "18-64"]) & (RAW.country == "UK"),
        ),
    ],
)
def test_where_on_derived_dimensions_equals_pandas(guard: Guard, where: str, mask: Any) -> None:
    result = guard.query(f"SELECT COUNT(*), SUM(income) FROM people WHERE {where}", "bob")
    assert result.flags[0] == ["released", "released"], result.notes
    assert result.rows[0] == [int(mask.sum()), int(RAW[mask].income.sum())]


def test_rollup_over_a_hierarchy_gives_its_totals(fresh: Guard) -> None:
    result = fresh.query(
        "SELECT country, region, COUNT(*) AS people FROM people GROUP BY ROLLUP (country, region)", "alice"
    )
    got = _released(result, 2)
    # every region lies in one country: no (country, region) pair outside the map
    assert {(c, r) for c, r in got if r is not None} <= {(country, region) for region, country in _map()}
    assert got[(None, None)] == [len(RAW)]
    for country, members in RAW.groupby("country"):
        assert got[(country, None)] == [len(members)]
        for region, rows in members.groupby("region"):
            # Wales (one person) is withheld, and with it a complement in the same country
            assert got[(country, region)] in ([len(rows)], [None])
    assert got[("UK", "Wales")] == [None]
    assert sum(v[0] for (c, r), v in got.items() if c == "DE" and r is not None) == len(
        RAW[RAW.country == "DE"]
    )


def _map() -> list[tuple[str, str]]:
    return list(RAW[["region", "country"]].drop_duplicates().itertuples(index=False, name=None))


def test_a_small_band_cell_is_withheld(guard: Guard) -> None:
    result = guard.query("SELECT age_band, COUNT(*) FROM people GROUP BY age_band", "alice")
    flags = {row[0]: f[1] for row, f in zip(result.rows, result.flags, strict=True)}
    assert (RAW.age_band == "65+").sum() == 2
    assert flags["65+"] == "suppressed"
    assert flags[None] == "suppressed"  # the one person of unknown age


def test_listing_a_derived_dimension_withholds_small_values(guard: Guard) -> None:
    result = guard.query("SELECT DISTINCT age_band FROM people", "bob")
    assert sorted(row[0] for row in result.rows) == ["0-17", "18-64"]
    labels = guard.query("SELECT health_label FROM people GROUP BY health_label ORDER BY 1", "bob")
    assert [row[0] for row in labels.rows] == sorted(RAW.health_label.unique())


def test_catalog_shows_derived_dimensions_as_text_columns(guard: Guard) -> None:
    analyst = guard.policy.analyst("alice")
    assert analyst is not None
    tables = visible_tables(guard.policy, analyst, lambda t: guard.backend.table_info(t).types)
    database = CatalogDatabase("alice", tables)
    try:
        answer = database.run(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'people' "
            "ORDER BY ordinal_position"
        )
    finally:
        database.close()
    assert answer.rows[-3:] == [("age_band", "VARCHAR"), ("country", "VARCHAR"), ("health_label", "VARCHAR")]
    comments = {c.name: c.description for c in tables[0].columns}
    assert comments["age_band"] == "bands of age" and comments["country"] == "map of region"


def test_a_map_file_and_other(tmp_path: Path) -> None:
    (tmp_path / "regions.csv").write_text("region,nation\nNorth,England\nSouth,England\nEast,England\n")

    def change(document: dict[str, Any]) -> None:
        document["tables"]["people"]["derived"] = {
            "nation": {"from": "region", "map_file": "regions.csv", "other": "elsewhere"},
            "income_band": {"from": "income", "bands": [{"below": 500, "label": "low"}, {"label": "high"}]},
        }

    with Guard.open(write_people(tmp_path, change=change), state=tmp_path / "state") as guard:
        result = guard.query(
            "SELECT nation, income_band, COUNT(*) FROM people GROUP BY nation, income_band", "alice"
        )
    nation = RAW.region.map({"North": "England", "South": "England", "East": "England"}).fillna("elsewhere")
    band = RAW.income.map(lambda v: "low" if v < 500 else "high")
    reference = pd.crosstab(nation, band)
    for (n, b), (count,) in _released(result, 2).items():
        if count is not None:
            assert count == reference.loc[n, b]


@pytest.mark.parametrize(
    ("derived", "message"),
    [
        (
            {"region_band": {"from": "region", "bands": [{"upto": 1, "label": "a"}, {"label": "b"}]}},
            "people.yaml: tables.people.derived.region_band.bands: bands need a numeric column, and region "
            "has VARCHAR: derive with map: or labels: instead",
        ),
        (
            {"country": {"from": "region", "map": {"North": "UK"}}},
            "people.yaml: tables.people.derived.country.map: region has 5 values with no label ('Bavaria', "
            "'East', 'Saxony', ...): add them, or declare other: with the label of every value not listed",
        ),
        (
            {"health_label": {"from": "health", "labels": {"one": "very poor"}, "other": "x"}},
            "people.yaml: tables.people.derived.health_label.labels: the key 'one' is not a number, but "
            "health is numeric: write its values as numbers",
        ),
        (
            {"health_label": {"from": "health", "labels": {"1": "very poor", 1: "poor"}, "other": "x"}},
            "people.yaml: tables.people.derived.health_label.labels: the keys '1' and 1 are the same value "
            "of health: keep one",
        ),
        (
            {"income_label": {"from": "income", "labels": {500: "five hundred"}}},
            "people.yaml: tables.people.derived.income_label.labels: income has 40 values with no label: "
            "add them",
        ),
    ],
)
def test_what_the_snapshot_checks(tmp_path: Path, derived: dict[str, Any], message: str) -> None:
    def change(document: dict[str, Any]) -> None:
        document["tables"]["people"]["derived"] = derived

    with pytest.raises(PolicyError) as error:
        Guard.open(write_people(tmp_path, change=change), state=tmp_path / "state")
    assert str(error.value).startswith(message), str(error.value)
    # nothing half-built is left behind to be reused
    assert not list((tmp_path / "state" / "snapshots").glob("*.duckdb"))


def test_a_changed_derivation_is_a_new_data_version(tmp_path: Path) -> None:
    def narrower(document: dict[str, Any]) -> None:
        document["tables"]["people"]["derived"]["age_band"]["bands"][1]["upto"] = 63

    def versions(policy: Path) -> tuple[str, Any]:
        with Guard.open(policy, state=tmp_path / "state") as guard:
            info = guard.backend.table_info("people")
            rows = guard.query("SELECT age_band, COUNT(*) FROM people GROUP BY age_band", "alice").rows
        return info.data_version, rows

    first, before = versions(write_people(tmp_path / "a"))
    again, _ = versions(write_people(tmp_path / "a"))
    changed, after = versions(write_people(tmp_path / "a", change=narrower))
    assert first == again != changed
    assert ["65+", 2] in before or ["65+", None] in before
    assert ["65+", 3] in after  # the person aged 64 moved up a band: old bands are gone


def test_noise_mode_groups_by_derived_dimensions(tmp_path: Path) -> None:
    def change(document: dict[str, Any]) -> None:
        document["noise"] = {"mode": "noise", "group_threshold": 2, "budgets": {"per_analyst": 5}}

    with Guard.open(write_people(tmp_path, change=change), state=tmp_path / "state") as guard:
        result = guard.query(
            "SELECT country, COUNT(*) FROM people WHERE age_band = '18-64' GROUP BY country", "alice"
        )
    assert {row[0] for row in result.rows} <= {"UK", "DE"} and result.rows
    assert {f[1] for f in result.flags} == {"noised"}
    assert any("ε" in note for note in result.notes)
