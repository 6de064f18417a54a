"""The DuckDB snapshot: declared columns only, stable ids, a locked read-only connection."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import yaml
from sqlglot import exp

from guard import Guard
from guard.errors import PolicyError

ROOT = Path(__file__).resolve().parents[2]


def test_identifiers_never_loaded(students: Guard) -> None:
    info = students.backend.table_info("students")
    assert set(info.types) == {"sex", "major", "class", "income"}
    columns = students.backend.execute(exp.select("*").from_("students").limit(1)).columns
    assert "name" not in columns and set(columns) == {
        "_rid",
        "_uid",
        "_ukey",
        "sex",
        "major",
        "class",
        "income",
    }


def test_table_facts(students: Guard) -> None:
    info = students.backend.table_info("students")
    assert (info.rows, info.units, info.one_row_per_unit) == (9, 9, True)
    assert info.population("income") == 9 and info.population(None) == 9
    assert len(info.data_version) == 64


def test_surrogate_ids_are_stable_across_rebuilds(tmp_path: Path) -> None:
    def ids(state: Path) -> list[tuple]:
        with Guard.open(ROOT / "policies/castro.yaml", state=state) as guard:
            query = exp.select("_rid", "_uid", "salary", "municipality").from_("castro").order_by("_rid")
            return guard.backend.execute(query).rows

    first, second = ids(tmp_path / "a"), ids(tmp_path / "b")
    assert first == second
    assert [row[0] for row in first] == list(range(346))


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "ATTACH '/tmp/statguard-test.db' AS x",
        "SET enable_external_access = true",
        "CREATE TABLE x (a INTEGER)",
        "INSTALL httpfs",
        "COPY students TO '/tmp/statguard-leak.csv'",
    ],
)
def test_connection_is_locked_down(students: Guard, statement: str) -> None:
    """Even a statement that slipped past validation cannot reach outside the snapshot."""
    cursor = students.backend._cursor()
    with pytest.raises(duckdb.Error):
        cursor.execute(statement)


def test_snapshot_reused_and_replaced_on_change(tmp_path: Path) -> None:
    data = tmp_path / "students.csv"
    data.write_text((ROOT / "examples/students/students.csv").read_text())
    document = yaml.safe_load((ROOT / "policies/students.yaml").read_text())
    document["tables"]["students"]["source"]["csv"] = str(data)
    policy = tmp_path / "students.yaml"
    policy.write_text(yaml.safe_dump(document))
    state = tmp_path / "state"
    with Guard.open(policy, state=state) as guard:
        version = guard.backend.table_info("students").data_version
    snapshots = list((state / "snapshots").glob("*.duckdb"))
    with Guard.open(policy, state=state) as guard:
        assert guard.backend.table_info("students").data_version == version
    assert list((state / "snapshots").glob("*.duckdb")) == snapshots
    data.write_text(data.read_text() + "Jones,Female,EE,1982,55000\n")
    with Guard.open(policy, state=state) as guard:
        info = guard.backend.table_info("students")
        assert info.data_version != version and info.rows == 10
    assert len(list((state / "snapshots").glob("*.duckdb"))) == 1


def test_declared_column_missing_from_source(tmp_path: Path) -> None:
    document = yaml.safe_load((ROOT / "policies/students.yaml").read_text())
    document["tables"]["students"]["source"]["csv"] = str(ROOT / "examples/students/students.csv")
    document["tables"]["students"]["columns"]["incme"] = document["tables"]["students"]["columns"].pop(
        "income"
    )
    policy = tmp_path / "p.yaml"
    policy.write_text(yaml.safe_dump(document))
    with pytest.raises(
        PolicyError,
        match=r"tables.students.columns.incme: not a column of the source .*did you mean 'income'",
    ):
        Guard.open(policy, state=tmp_path / "state")


def test_measure_must_be_numeric(tmp_path: Path) -> None:
    document = yaml.safe_load((ROOT / "policies/students.yaml").read_text())
    document["tables"]["students"]["source"]["csv"] = str(ROOT / "examples/students/students.csv")
    document["tables"]["students"]["columns"]["major"] = {"role": "measure", "bounds": [0, 10]}
    policy = tmp_path / "p.yaml"
    policy.write_text(yaml.safe_dump(document))
    with pytest.raises(
        PolicyError, match=r"columns\.major: a measure must be numeric, the source has VARCHAR"
    ):
        Guard.open(policy, state=tmp_path / "state")


def test_missing_source_file(tmp_path: Path) -> None:
    document = yaml.safe_load((ROOT / "policies/students.yaml").read_text())
    document["tables"]["students"]["source"]["csv"] = str(tmp_path / "nope.csv")
    policy = tmp_path / "p.yaml"
    policy.write_text(yaml.safe_dump(document))
    with pytest.raises(PolicyError, match="cannot read the source"):
        Guard.open(policy, state=tmp_path / "state")


def test_parquet_and_duckdb_sources(tmp_path: Path) -> None:
    csv = ROOT / "examples/students/students.csv"
    con = duckdb.connect(str(tmp_path / "src.duckdb"))
    con.execute(f"CREATE TABLE pupils AS SELECT * FROM read_csv('{csv}')")
    con.execute(f"COPY pupils TO '{tmp_path / 'students.parquet'}' (FORMAT parquet)")
    con.close()
    base = yaml.safe_load((ROOT / "policies/students.yaml").read_text())
    for source in ({"parquet": "students.parquet"}, {"duckdb": "src.duckdb", "table": "pupils"}):
        base["tables"]["students"]["source"] = source
        policy = tmp_path / "p.yaml"
        policy.write_text(yaml.safe_dump(base))
        with Guard.open(policy, state=tmp_path / f"state-{next(iter(source))}") as guard:
            result = guard.query("SELECT major, SUM(income) FROM students GROUP BY major", analyst="alice")
            assert result.rows == [["CS", 358000], ["EE", 240000]]
