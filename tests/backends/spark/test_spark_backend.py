"""The Spark back-end: the same snapshot as DuckDB's, TABLE sources, a locked query path."""

from __future__ import annotations

import datetime
import re
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlglot
import yaml
from sqlglot import exp

from guard.backends.duckdb_backend import DuckDBBackend
from guard.errors import BackendError, PolicyError
from guard.policy.load import load_policy
from tests.backends.spark_session import backend_section

pytest.importorskip("pyspark")

from pyspark.errors import PySparkException

from guard.backends.spark_backend import SPARK_CAPABILITIES, SparkBackend, check_query
from guard.plan.sql import grouping_id
from guard.query.shape import QueryShape

UKEY_SHIFT = 1 << 63


def _all_rows(backend: Any, table: str, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = backend.execute(exp.select(*columns).from_(table).order_by("_rid")).rows
    return rows


@pytest.mark.parametrize("name", ["students", "castro", "hospital"])
def test_file_snapshot_matches_duckdb(policies: Path, tmp_path: Path, name: str) -> None:
    """Spark answers from the DuckDB loader's snapshot: same facts, same ids, same values."""
    policy = load_policy(policies / f"{name}.yaml", state=tmp_path / "state")
    spark, duck = SparkBackend(policy), DuckDBBackend(policy)
    try:
        table = policy.tables[0].name
        assert spark.table_info(table) == duck.table_info(table)
        columns = ("_rid", "_uid", "_ukey", *spark.table_info(table).types)
        spark_rows, duck_rows = _all_rows(spark, table, columns), _all_rows(duck, table, columns)
        # Spark has no unsigned BIGINT: _ukey is DuckDB's shifted by 2^63
        assert spark_rows == [(r[0], r[1], r[2] - UKEY_SHIFT, *r[3:]) for r in duck_rows]
    finally:
        spark.close()
        duck.close()


def test_identifiers_never_loaded(students_spark: Any) -> None:
    columns = students_spark.execute(exp.select("*").from_("students").limit(1)).columns
    assert set(columns) == {"_rid", "_uid", "_ukey", "sex", "major", "class", "income"}


def test_export_reused_on_reopen(policies: Path, tmp_path: Path) -> None:
    policy = load_policy(policies / "students.yaml", state=tmp_path / "state")
    SparkBackend(policy).close()
    exports = list((tmp_path / "state/snapshots/spark/students").iterdir())
    assert [p.name.startswith("files-") for p in exports] == [True]
    built = exports[0].stat().st_mtime_ns
    backend = SparkBackend(policy)
    try:
        assert list((tmp_path / "state/snapshots/spark/students").iterdir()) == exports
        assert exports[0].stat().st_mtime_ns == built
        assert backend.table_info("students").rows == 9
    finally:
        backend.close()


# ---------------------------------------------------------------------------- TABLE sources

PEOPLE = [
    # pid, name, region, day, income
    (1, "Ann", "north", datetime.date(2024, 1, 1), Decimal("10.50")),
    (1, "Ann", "north", datetime.date(2024, 1, 2), Decimal("4.00")),
    (2, "Bob", "south", datetime.date(2024, 1, 1), None),
    (3, "Cy", None, datetime.date(2024, 1, 3), Decimal("7.25")),
    (4, "Di", "south", datetime.date(2024, 1, 3), Decimal("1.00")),
    (None, "Eve", "north", datetime.date(2024, 1, 4), Decimal("99.00")),
]
SCHEMA = "pid BIGINT, name STRING, region STRING, day DATE, income DECIMAL(10,2)"


def _people_policy(
    folder: Path,
    table: str = "global_temp.people",
    extra: dict[str, Any] | None = None,
    derived: dict[str, Any] | None = None,
) -> Path:
    document = {
        "name": "people",
        "backend": backend_section(),
        "tables": {
            "people": {
                "source": {"table": table},
                "privacy_unit": "pid",
                "columns": {
                    "pid": {"role": "identifier"},
                    "name": {"role": "identifier"},
                    "region": {"role": "dimension"},
                    "day": {"role": "dimension"},
                    "income": {"role": "measure", "bounds": [0, 100]},
                    **(extra or {}),
                },
            }
        },
        "analysts": {"alice": {}},
    }
    if derived is not None:
        document["tables"]["people"]["derived"] = derived  # type: ignore[index]
    path = folder / "people.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_table_source_snapshot(spark: Any, tmp_path: Path) -> None:
    """A table Spark already has: counted in Spark, rows without a unit dropped, a new
    data version when its data change and the same one when they do not."""
    spark.createDataFrame(PEOPLE, SCHEMA).createOrReplaceGlobalTempView("people")
    policy = load_policy(_people_policy(tmp_path), state=tmp_path / "state")
    backend = SparkBackend(policy)
    try:
        info = backend.table_info("people")
        assert info.types == {"region": "VARCHAR", "day": "DATE", "income": "DECIMAL(10,2)"}
        assert (info.rows, info.units, info.one_row_per_unit) == (5, 4, False)
        assert info.units_with_value == {"region": 3, "day": 4, "income": 3}
        rows = _all_rows(backend, "people", ("_rid", "_uid", "region", "income"))
        assert [r[0] for r in rows] == [0, 1, 2, 3, 4]
        assert sorted({r[1] for r in rows}) == [0, 1, 2, 3]
        assert "name" not in backend.execute(exp.select("*").from_("people")).columns
        version = info.data_version
    finally:
        backend.close()

    again = SparkBackend(policy)
    assert again.table_info("people").data_version == version
    again.close()

    changed = [*PEOPLE[:-2], (4, "Di", "south", datetime.date(2024, 1, 3), Decimal("2.00"))]
    spark.createDataFrame(changed, SCHEMA).createOrReplaceGlobalTempView("people")
    try:
        reopened = SparkBackend(policy)
        assert reopened.table_info("people").data_version != version
        assert reopened.execute(exp.select("SUM(income)").from_("people")).rows == [(23.75,)]
        reopened.close()
    finally:
        spark.catalog.dropGlobalTempView("people")


def test_table_source_derived_dimensions(spark: Any, tmp_path: Path) -> None:
    """Derived dimensions of a table Spark already has: computed in Spark by the same
    CASE as DuckDB's, text columns, checked for unmapped values, part of the version."""
    spark.createDataFrame(PEOPLE, SCHEMA).createOrReplaceGlobalTempView("people_d")
    bands = [{"below": 5, "label": "small"}, {"label": "large"}]
    derived = {
        "area": {"from": "region", "map": {"north": "N", "south": "S"}},
        "size": {"from": "income", "bands": bands},
    }
    try:
        backend = SparkBackend(load_policy(_people_policy(tmp_path, "global_temp.people_d", derived=derived)))
        try:
            info = backend.table_info("people")
            assert (info.types["area"], info.types["size"]) == ("VARCHAR", "VARCHAR")
            assert info.units_with_value["area"] == 3 and info.units_with_value["size"] == 3
            rows = _all_rows(backend, "people", ("region", "income", "area", "size"))
            expected = {
                ("north", 10.5, "N", "large"),
                ("north", 4.0, "N", "small"),
                ("south", None, "S", None),
            }
            assert expected | {(None, 7.25, None, "large"), ("south", 1.0, "S", "small")} == set(rows)
            version = info.data_version
        finally:
            backend.close()
        derived["area"]["map"]["south"] = "South"
        changed = SparkBackend(load_policy(_people_policy(tmp_path, "global_temp.people_d", derived=derived)))
        assert changed.table_info("people").data_version != version
        changed.close()
        del derived["area"]["map"]["south"]
        (tmp_path / "x").mkdir()
        (tmp_path / "y").mkdir()
        with pytest.raises(
            PolicyError, match=r"derived.area.map: region has 1 value with no label \('south'\)"
        ):
            SparkBackend(load_policy(_people_policy(tmp_path / "x", "global_temp.people_d", derived=derived)))
        dated = {"when": {"from": "day", "labels": {"2024-01-01": "new year"}}}
        with pytest.raises(
            PolicyError, match=r"derived.when.from: day has DATE; a map or labels need a number"
        ):
            SparkBackend(load_policy(_people_policy(tmp_path / "y", "global_temp.people_d", derived=dated)))
    finally:
        spark.catalog.dropGlobalTempView("people_d")


@pytest.mark.parametrize(
    ("table", "extra", "message"),
    [
        ("global_temp.nobody", None, "tables.people.source: Spark has no table 'global_temp.nobody'"),
        (
            "global_temp.people_e",
            {"incme": {"role": "measure", "bounds": [0, 10]}},
            "columns.incme: not a column of the Spark table global_temp.people_e (did you mean 'income'?)",
        ),
        (
            "global_temp.people_e",
            {"name": {"role": "measure", "bounds": [0, 10]}},
            "columns.name: a measure must be numeric",
        ),
    ],
)
def test_table_source_errors(
    spark: Any, tmp_path: Path, table: str, extra: dict[str, Any] | None, message: str
) -> None:
    spark.createDataFrame(PEOPLE, SCHEMA).createOrReplaceGlobalTempView("people_e")
    policy = load_policy(_people_policy(tmp_path, table, extra), state=tmp_path / "state")
    with pytest.raises(PolicyError, match=re.escape(message)):
        SparkBackend(policy)


# ------------------------------------------------------------------------------ lockdown


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("INSERT INTO students SELECT * FROM students", "runs queries only, not Insert"),
        ("DROP TABLE students", "runs queries only, not Drop"),
        ("SET spark.sql.runSQLOnFiles = true", "runs queries only, not Set"),
        ("CACHE TABLE students", "runs queries only, not Cache"),
        ("SELECT * FROM (SELECT 1) AS t WHERE EXISTS (SELECT * FROM people)", "not 'people'"),
        ("SELECT * FROM default.students", "not default.students"),
        ("SELECT * FROM parquet.`/etc`", "not parquet.`/etc`"),
        ("SELECT * FROM range(10)", "not a table function"),
        ("SELECT reflect('java.lang.System', 'exit', '0') FROM students", "refuses the function reflect"),
    ],
)
def test_refused_trees(students_spark: Any, sql: str, message: str) -> None:
    """Only guard-generated reads of the declared tables run; anything else is refused
    before Spark sees it."""
    tree = sqlglot.parse_one(sql, read="spark")
    with pytest.raises(BackendError, match=re.escape(message)):
        students_spark.execute(tree)


def test_ctes_may_be_read() -> None:
    check_query(sqlglot.parse_one("WITH c AS (SELECT * FROM students) SELECT * FROM c"), {"students"})


def test_session_refuses_files(students_spark: Any) -> None:
    """Even a statement that skipped the tree check could not read a file by path."""
    assert students_spark._spark.conf.get("spark.sql.runSQLOnFiles") == "false"
    with pytest.raises(PySparkException, match=r"TABLE_OR_VIEW_NOT_FOUND"):
        students_spark._spark.sql("SELECT * FROM parquet.`/etc`").collect()


def test_engine_error_is_one_line(students_spark: Any) -> None:
    tree = sqlglot.parse_one("SELECT no_such_column FROM students", read="spark")
    with pytest.raises(BackendError) as caught:
        students_spark.execute(tree)
    assert caught.value.message.startswith("the data engine failed: [UNRESOLVED_COLUMN")
    assert "\n" not in caught.value.message and "\tat " not in caught.value.message


def test_grouping_of_several_columns(students_spark: Any) -> None:
    """The generator's spelling of the grouping bitmask for engines whose GROUPING() takes
    one key (SPARK_CAPABILITIES.single_key_grouping) is the standard mask over a subset
    of the GROUP BY keys (Spark's grouping_id() would have to name _uid as well)."""
    shape = QueryShape(
        table="students",
        predicates=(),
        group_by=("sex", "major"),
        grouping_sets=(("sex", "major"), ("sex",), ()),
        aggregates=(),
        outputs=(),
    )
    mask = grouping_id(shape, SPARK_CAPABILITIES)
    assert "GROUPING(`sex`, `major`)" not in mask.sql("spark")
    tree = sqlglot.parse_one(
        "SELECT sex, major, COUNT(*) AS n FROM students "
        "GROUP BY GROUPING SETS ((sex, major, _uid), (sex, _uid), (_uid)) ORDER BY 3, sex, major",
        read="duckdb",
    )
    assert isinstance(tree, exp.Select)
    tree.expressions.insert(2, mask)
    rows = students_spark.execute(tree).rows
    assert {row[2] for row in rows} == {0, 1, 3}
    assert all((row[2] & 1) == (row[1] is None) and (row[2] >> 1) == (row[0] is None) for row in rows)


def test_concurrent_queries(students_spark: Any) -> None:
    """The Guard executes from several threads; one session serves them all."""
    query = exp.select("major", "SUM(income) AS s").from_("students").group_by("major").order_by("major")
    results: list[Any] = []

    def run() -> None:
        results.append(students_spark.execute(query).rows)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [[("CS", 358000), ("EE", 240000)]] * 4
