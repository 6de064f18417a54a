"""PostgreSQL snapshots: the same facts as DuckDB's for files, in-engine for tables, reused."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlglot import exp

from guard import Guard
from guard.backends.postgres_snapshot import Snapshotter
from guard.errors import PolicyError
from tests.backends.pg_server import OWNER, PostgresServer

SHIFT = 1 << 63


def _rows(guard: Guard, table: str, columns: list[str]) -> list[tuple[Any, ...]]:
    query = exp.select("_rid", "_uid", "_ukey", *columns).from_(table).order_by("_rid")
    return guard.backend.execute(query).rows


@pytest.mark.parametrize(
    ("source", "table", "columns"),
    [
        ("students", "students", ["sex", "major", "class", "income"]),
        ("castro", "castro", ["municipality", "profession", "salary"]),
        ("hospital", "hospital", ["town", "income"]),
    ],
)
def test_file_snapshot_matches_duckdb(
    pg_policy: Callable[..., Path], tmp_path: Path, source: str, table: str, columns: list[str]
) -> None:
    policy = pg_policy(source)
    with (
        Guard.open(policy, state=tmp_path / "pg") as pg,
        Guard.open(policy, state=tmp_path / "duck", backend="duckdb") as duck,
    ):
        assert pg.backend.table_info(table) == duck.backend.table_info(table)
        expected = [(rid, uid, ukey - SHIFT, *rest) for rid, uid, ukey, *rest in _rows(duck, table, columns)]
        assert _rows(pg, table, columns) == expected


def test_identifiers_never_loaded(pg_policy: Callable[..., Path], tmp_path: Path) -> None:
    with Guard.open(pg_policy("students"), state=tmp_path / "state") as guard:
        columns = guard.backend.execute(exp.select("*").from_("students").limit(1)).columns
    assert set(columns) == {"_rid", "_uid", "_ukey", "sex", "major", "class", "income"}


@pytest.fixture
def people(postgres_server: PostgresServer, schema: str) -> Iterator[str]:
    """A table already in PostgreSQL: several rows per person, NULLs, a row without a person."""
    name = f"public.people_{schema}"
    postgres_server.run_sql(
        f"CREATE TABLE {name} (pid text, secret text, region varchar(8), year integer, "
        "amount numeric(10,2), score double precision, tag uuid)",
        f"INSERT INTO {name} VALUES "
        "('p1', 's', 'N', 2020, 10.50, 1.5, gen_random_uuid()), "
        "('p1', 's', 'S', 2021, 20.00, NULL, NULL), "
        "('p2', 's', NULL, 2020, NULL, 2.5, NULL), "
        "('p3', 's', 'N', 2020, 7.25, -1, NULL), "
        "('p3', 's', 'N', 2020, 7.25, -1, NULL), "
        "(NULL, 's', 'E', 2022, 99.00, 9, NULL)",
        # the owner builds the snapshot; the query role never reads the live table
        f"GRANT SELECT ON {name} TO {OWNER}",
    )
    yield name
    postgres_server.run_sql(f"DROP TABLE {name}")


def _people_policy(
    pg_policy: Callable[..., Path],
    source: str,
    tweak: Callable[[dict[str, Any]], None] | None = None,
    derived: dict[str, Any] | None = None,
    **backend: str | None,
) -> Path:
    def change(document: dict[str, Any]) -> None:
        document["tables"] = {
            "people": {
                "source": {"table": source},
                "privacy_unit": "pid",
                "columns": {
                    "pid": {"role": "identifier"},
                    "secret": {"role": "identifier"},
                    "region": {"role": "dimension"},
                    "year": {"role": "dimension"},
                    "tag": {"role": "dimension"},
                    "amount": {"role": "measure", "bounds": [0, 100]},
                    "score": {"role": "measure", "bounds": [-10, 10]},
                },
            }
        }
        if tweak is not None:
            tweak(document["tables"]["people"]["columns"])
        if derived is not None:
            document["tables"]["people"]["derived"] = derived

    return pg_policy("students", change, **backend)


def test_table_source(pg_policy: Callable[..., Path], people: str, tmp_path: Path) -> None:
    with Guard.open(_people_policy(pg_policy, people), state=tmp_path / "state") as guard:
        info = guard.backend.table_info("people")
        assert dict(info.types) == {
            "region": "VARCHAR",
            "year": "INTEGER",
            "tag": "VARCHAR",
            "amount": "DECIMAL(10,2)",
            "score": "DOUBLE",
        }
        assert (info.rows, info.units, info.one_row_per_unit) == (5, 3, False)
        assert info.units_with_value == {"region": 2, "year": 3, "tag": 1, "amount": 2, "score": 3}
        assert len(info.data_version) == 64
        result = guard.backend.execute(exp.select("*").from_("people").order_by("_rid"))
        assert set(result.columns) == {"_rid", "_uid", "_ukey", "region", "year", "tag", "amount", "score"}
        rows = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
        assert [row["_rid"] for row in rows] == [0, 1, 2, 3, 4]
        assert sorted({row["_uid"] for row in rows}) == [0, 1, 2]
        # one person's rows share _uid and _ukey; values come back as plain numbers
        ukeys = {row["_uid"]: row["_ukey"] for row in rows}
        assert all(ukeys[row["_uid"]] == row["_ukey"] for row in rows) and len(set(ukeys.values())) == 3
        assert sorted((row["amount"] for row in rows), key=str) == [10.5, 20.0, 7.25, 7.25, None]
        answer = guard.query("SELECT year, SUM(amount) FROM people GROUP BY year", analyst="alice")
        assert answer.columns[0] == "year"


def test_table_source_derived_dimensions(pg_policy: Callable[..., Path], people: str, tmp_path: Path) -> None:
    """Derived dimensions of a PostgreSQL table: computed in the engine by the same CASE
    as DuckDB's, text columns, checked for unmapped values, part of the data version."""
    derived: dict[str, Any] = {
        "area": {"from": "region", "map": {"N": "North", "S": "South"}},
        "period": {"from": "year", "bands": [{"upto": 2020, "label": "early"}, {"label": "late"}]},
        "level": {"from": "amount", "labels": {7.25: "low"}, "other": "other"},
    }

    def opened(folder: str) -> Guard:
        return Guard.open(_people_policy(pg_policy, people, derived=derived), state=tmp_path / folder)

    with opened("a") as guard:
        info = guard.backend.table_info("people")
        assert {k: info.types[k] for k in derived} == {
            "area": "VARCHAR",
            "period": "VARCHAR",
            "level": "VARCHAR",
        }
        assert {k: info.units_with_value[k] for k in derived} == {"area": 2, "period": 3, "level": 2}
        rows = _rows(guard, "people", ["region", "year", "amount", "area", "period", "level"])
        assert sorted((row[3:] for row in rows), key=repr) == sorted(
            [
                ("N", 2020, 10.5, "North", "early", "other"),
                ("S", 2021, 20.0, "South", "late", "other"),
                (None, 2020, None, None, "early", None),
                ("N", 2020, 7.25, "North", "early", "low"),
                ("N", 2020, 7.25, "North", "early", "low"),
            ],
            key=repr,
        )
        answer = guard.query(
            "SELECT area, COUNT(*) FROM people WHERE period = 'early' GROUP BY area", "alice"
        )
        assert answer.columns[0] == "area"
        version = info.data_version
    derived["area"]["map"]["S"] = "Elsewhere"
    with opened("b") as guard:
        assert guard.backend.table_info("people").data_version != version
    del derived["area"]["map"]["S"]
    with pytest.raises(PolicyError, match=r"derived.area.map: region has 1 value with no label \('S'\)"):
        opened("c")


def test_table_source_version_follows_the_data(
    pg_policy: Callable[..., Path], people: str, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    policy = _people_policy(pg_policy, people)

    def version() -> str:
        with Guard.open(policy, state=tmp_path / "state") as guard:
            return guard.backend.table_info("people").data_version

    first = version()
    assert version() == first
    postgres_server.run_sql(f"UPDATE {people} SET amount = amount + 1 WHERE pid = 'p2'")
    assert version() == first  # NULL + 1 is NULL: the same data
    postgres_server.run_sql(f"UPDATE {people} SET amount = 8 WHERE pid = 'p3'")
    second = version()
    assert second != first
    with Guard.open(policy, state=tmp_path / "state") as guard:
        assert guard.backend.table_info("people").rows == 5


def test_table_source_errors(pg_policy: Callable[..., Path], people: str, tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"source.table: no table public.nobody visible"):
        Guard.open(_people_policy(pg_policy, "public.nobody"), state=tmp_path / "a")

    def misspelt(columns: dict[str, Any]) -> None:
        columns["regio"] = columns.pop("region")

    policy = _people_policy(pg_policy, people, misspelt)
    with pytest.raises(PolicyError, match=r"columns.regio: not a column of .*did you mean 'region'"):
        Guard.open(policy, state=tmp_path / "b")


def test_table_measure_must_be_numeric(pg_policy: Callable[..., Path], people: str, tmp_path: Path) -> None:
    def tag_as_measure(columns: dict[str, Any]) -> None:
        columns["tag"] = {"role": "measure", "bounds": [0, 10]}

    policy = _people_policy(pg_policy, people, tag_as_measure)
    with pytest.raises(PolicyError, match=r"columns.tag: a measure must be numeric, the source has uuid"):
        Guard.open(policy, state=tmp_path / "state")


def test_snapshot_reused_not_rebuilt(
    pg_policy: Callable[..., Path],
    people: str,
    postgres_server: PostgresServer,
    schema: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    students, people_policy = pg_policy("students"), _people_policy(pg_policy, people)
    for policy in (students, people_policy):
        Guard.open(policy, state=tmp_path / "state").close()

    def no_build(*args: Any) -> None:
        raise AssertionError("a current snapshot was rebuilt")

    monkeypatch.setattr(Snapshotter, "_build", no_build)
    for policy in (students, people_policy):
        Guard.open(policy, state=tmp_path / "state").close()
    with postgres_server.connect() as con:
        names = con.execute(f"SELECT name FROM {schema}._guard_tables ORDER BY name").fetchall()
    assert names == [("people",), ("students",)]


def test_missing_snapshot_needs_the_owner(
    pg_policy: Callable[..., Path], postgres_server: PostgresServer, tmp_path: Path
) -> None:
    reader_only = pg_policy("hospital", owner_dsn=None)
    with pytest.raises(
        PolicyError, match=r"backend.owner_dsn: the snapshot of table hospital .* add backend.owner_dsn"
    ):
        Guard.open(reader_only, state=tmp_path / "state")
    # once the owner has built it, the query role alone finds and reads it
    Guard.open(pg_policy("hospital"), state=tmp_path / "state").close()
    with Guard.open(reader_only, state=tmp_path / "state") as guard:
        assert guard.backend.table_info("hospital").rows == 168
