"""Metadata probes are answered from the policy: declared tables, their non-identifier
columns, nothing of the data and nothing of the engine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from guard.policy.credentials import make_verifier

ROOT = Path(__file__).resolve().parents[3]

# JDBC's DatabaseMetaData.getTables and getColumns (pgjdbc 42.7), as sent
JDBC_GET_TABLES = """
SELECT current_database() AS "TABLE_CAT", n.nspname AS "TABLE_SCHEM", c.relname AS "TABLE_NAME",
 CASE n.nspname ~ '^pg_' OR n.nspname = 'information_schema' WHEN true THEN 'SYSTEM TABLE'
 WHEN false THEN CASE c.relkind WHEN 'r' THEN 'TABLE' WHEN 'v' THEN 'VIEW' ELSE NULL END
 ELSE NULL END AS "TABLE_TYPE", d.description AS "REMARKS"
 FROM pg_catalog.pg_namespace n, pg_catalog.pg_class c
 LEFT JOIN pg_catalog.pg_description d
  ON (c.oid = d.objoid AND d.objsubid = 0 and d.classoid = 'pg_class'::regclass)
 WHERE c.relnamespace = n.oid AND c.relname LIKE $1 AND (false OR ( c.relkind = 'r'
 AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' ) )
 ORDER BY "TABLE_TYPE","TABLE_SCHEM","TABLE_NAME" """
JDBC_GET_COLUMNS = """
SELECT * FROM (SELECT current_database() AS current_database, n.nspname,c.relname,a.attname,
 a.atttypid,a.attnotnull OR (t.typtype = 'd' AND t.typnotnull) AS attnotnull,a.atttypmod,a.attlen,
 t.typtypmod, row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum) AS attnum,
 nullif(a.attidentity, '') as attidentity, nullif(a.attgenerated, '') as attgenerated,
 pg_catalog.pg_get_expr(def.adbin, def.adrelid) AS adsrc, dsc.description,t.typbasetype,t.typtype
 FROM pg_catalog.pg_namespace n
 JOIN pg_catalog.pg_class c ON (c.relnamespace = n.oid) JOIN pg_catalog.pg_attribute a ON (a.attrelid=c.oid)
 JOIN pg_catalog.pg_type t ON (a.atttypid = t.oid)
 LEFT JOIN pg_catalog.pg_attrdef def ON (a.attrelid=def.adrelid AND a.attnum = def.adnum)
 LEFT JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)
 LEFT JOIN pg_catalog.pg_class dc ON (dc.oid=dsc.classoid AND dc.relname='pg_class')
 LEFT JOIN pg_catalog.pg_namespace dn ON (dc.relnamespace=dn.oid AND dn.nspname='pg_catalog')
 WHERE c.relkind in ('r','p','v','f','m') and a.attnum > 0 AND NOT a.attisdropped AND c.relname LIKE $1) c
 WHERE true AND attname LIKE $2 ORDER BY nspname,c.relname,attnum"""


def _fetch(
    endpoint: Any, sql: str, parameters: tuple[Any, ...] | None = None, **login: str
) -> list[tuple[Any, ...]]:
    with psycopg.connect(endpoint.dsn(**login), autocommit=True) as conn:
        return conn.execute(sql, parameters).fetchall()


def test_information_schema_columns_has_no_identifiers(students: Any) -> None:
    rows = _fetch(
        students,
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_name = 'students' ORDER BY ordinal_position",
    )
    assert rows == [("sex", "text"), ("major", "text"), ("class", "bigint"), ("income", "bigint")]


def test_jdbc_get_tables_and_get_columns(students: Any) -> None:
    tables = _fetch(students, JDBC_GET_TABLES.replace("$1", "%s"), ("%",))
    assert tables == [("statguard", "public", "students", "TABLE", "One row per student.")]
    columns = _fetch(students, JDBC_GET_COLUMNS.replace("$1", "%s").replace("$2", "%s"), ("students", "%"))
    assert [(row[3], row[4], row[9]) for row in columns] == [
        ("sex", 25, 1),
        ("major", 25, 2),
        ("class", 20, 3),
        ("income", 20, 4),
    ]
    assert columns[3][13] == "yearly income"


def test_driver_start_up_probes(students: Any) -> None:
    with psycopg.connect(students.dsn(), autocommit=True) as conn:
        version = conn.execute("select pg_catalog.version()").fetchone()
        assert version is not None and version[0].startswith("PostgreSQL 16.0 (statguard")
        assert conn.execute("select current_schema()").fetchone() == ("public",)
        assert conn.execute("show transaction isolation level").fetchone() == ("read committed",)
        assert conn.execute("show standard_conforming_strings").fetchone() == ("on",)
        # psycopg's TypeInfo.fetch (SQLAlchemy asks it about hstore): no such type here
        typeinfo = conn.execute(
            "SELECT typname AS name, oid, typarray AS array_oid, oid::regtype::text AS regtype, "
            "typdelim AS delimiter FROM pg_type t WHERE t.oid = to_regtype(%s) ORDER BY t.oid",
            ("hstore",),
        )
        assert typeinfo.fetchall() == []
        assert conn.execute("SELECT 'int8'::regtype::text, 'students'::regclass::oid > 0").fetchone() == (
            "bigint",
            True,
        )


def test_catalog_functions_do_not_capture_the_callers_aliases(students: Any) -> None:
    rows = _fetch(
        students,
        "SELECT pg_catalog.format_type(t.oid, NULL), pg_catalog.pg_get_userbyid(t.typowner) "
        "FROM pg_catalog.pg_type t WHERE t.typname IN ('int8', 'text') ORDER BY 1",
    )
    assert rows == [("bigint", "statguard"), ("text", "statguard")]


def test_catalog_answers_never_hold_data(students: Any) -> None:
    # the catalog's copy of a table is empty: joining it with a catalog relation shows no row
    assert _fetch(students, "SELECT s.* FROM students s, pg_catalog.pg_class c") == []
    assert _fetch(students, "SELECT relname, reltuples FROM pg_class") == [("students", -1.0)]


@pytest.mark.parametrize(
    ("sql", "sqlstate"),
    [
        ("SELECT * FROM pg_catalog.duckdb_settings()", "42883"),
        ("SELECT * FROM duckdb_tables()", "42000"),  # not a catalog: the guard refuses it
        ("SELECT * FROM read_csv('/etc/passwd')", "42000"),
        ("SELECT getenv('HOME')", "42883"),
        ("SELECT * FROM pg_catalog.pg_nosuch", "42P01"),
    ],
)
def test_the_engine_behind_the_catalog_is_out_of_reach(students: Any, sql: str, sqlstate: str) -> None:
    with pytest.raises(psycopg.Error) as caught:
        _fetch(students, sql)
    assert caught.value.sqlstate == sqlstate


def test_features_statguard_lacks_are_empty(students: Any) -> None:
    assert _fetch(students, "SELECT polname FROM pg_catalog.pg_policy pol WHERE pol.polrelid = 1") == []
    assert _fetch(students, "SELECT count(*) FROM pg_catalog.pg_index") == [(0,)]


@pytest.fixture(scope="module")
def two_tables(serve: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("policy")
    policy = folder / "two.yaml"
    policy.write_text(
        f"""name: two
tables:
  students:
    source: {{csv: {ROOT / "examples/students/students.csv"}}}
    privacy_unit: name
    columns:
      name: {{role: identifier}}
      sex: {{role: dimension}}
      income: {{role: measure, bounds: [0, 200000]}}
  castro:
    source: {{csv: {ROOT / "examples/castro/castro.csv"}}}
    privacy_unit: person_id
    columns:
      person_id: {{role: identifier}}
      municipality: {{role: dimension}}
      salary: {{role: measure, bounds: [0, 2000]}}
analysts:
  alice: {{password: "{make_verifier("alice-demo")}"}}
  bob: {{tables: [students], password: "{make_verifier("bob-demo")}"}}
  carol: {{}}
"""
    )
    return serve(policy)


def test_each_analyst_sees_only_their_tables(two_tables: Any) -> None:
    listing = "SELECT table_name FROM information_schema.tables ORDER BY 1"
    assert _fetch(two_tables, listing) == [("castro",), ("students",)]
    assert _fetch(two_tables, listing, user="bob", password="bob-demo") == [("students",)]
    with pytest.raises(psycopg.Error) as caught:
        _fetch(two_tables, "SELECT COUNT(*) FROM castro", user="bob", password="bob-demo")
    assert "unknown table 'castro'" in str(caught.value)  # to bob it does not exist


def test_an_analyst_without_password_cannot_log_in(two_tables: Any) -> None:
    with pytest.raises(psycopg.OperationalError, match='password authentication failed for user "carol"'):
        _fetch(two_tables, "SELECT 1", user="carol", password="")


def test_a_runaway_catalog_query_is_stopped(students: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("guard.server.pgwire.catalog.CATALOG_TIMEOUT", 0.2)
    with pytest.raises(psycopg.Error) as caught:
        _fetch(students, "SELECT count(*) FROM generate_series(1, 100000000000) a, pg_class")
    assert caught.value.sqlstate == "57014"
    assert _fetch(students, "SELECT relname FROM pg_class") == [("students",)]
