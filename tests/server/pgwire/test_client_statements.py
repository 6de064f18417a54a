"""Client compatibility: the exact statements psql, pgjdbc, psycopg, DBeaver, Metabase and
Superset send to connect, browse and query (``clients.sql``), each answered or refused
with a clear SQLSTATE over both protocols; SQLAlchemy's reflection and pandas through the
running endpoint; a failed catalog query logged with its client and its text."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import psycopg
import pytest
import sqlalchemy as sa

HERE = Path(__file__).resolve().parent
DIRECTIVE = re.compile(r"--\s*(client|answer):\s*(.*?)\s*$")


@dataclass(frozen=True)
class Statement:
    line: int
    client: str
    answer: str
    sql: str


def _corpus() -> list[Statement]:
    statements: list[Statement] = []
    current: dict[str, Any] | None = None

    def flush() -> None:
        if current is not None:
            sql = "\n".join(current["lines"]).strip()
            statements.append(Statement(current["line"], current["client"], current["answer"], sql))

    for number, line in enumerate((HERE / "clients.sql").read_text().splitlines(), start=1):
        match = DIRECTIVE.match(line)
        if match and match.group(1) == "client":
            flush()
            current = {"line": number, "client": match.group(2), "answer": "", "lines": []}
        elif match and current is not None:
            current["answer"] = match.group(2)
        elif current is not None and not line.startswith("-- ##"):
            current["lines"].append(line)
    flush()
    return statements


STATEMENTS = _corpus()


def _check(statement: Statement, sqlstate: str | None, rows: int | None) -> None:
    kind, _, expected = statement.answer.partition(" ")
    assert sqlstate != "XX000", f"line {statement.line}: internal error"
    if kind == "error":
        assert sqlstate == expected, f"line {statement.line}: expected {expected}, got {sqlstate}"
        return
    assert sqlstate is None, f"line {statement.line}: refused with {sqlstate}"
    if kind == "command":
        assert rows is None, f"line {statement.line}: a command returned rows"
    elif expected.endswith("+"):
        assert rows is not None and rows >= int(expected[:-1]), f"line {statement.line}: {rows} rows"
    else:
        assert rows == int(expected), f"line {statement.line}: {rows} rows, expected {expected}"


def test_the_corpus_covers_every_client_and_step() -> None:
    clients = {s.client.split()[0] for s in STATEMENTS}
    assert clients == {"psql", "pgjdbc", "psycopg", "dbeaver", "metabase", "superset"}
    for client in clients:
        steps = {s.client.split()[1] for s in STATEMENTS if s.client.startswith(client)}
        assert {"connect", "browse", "query"} & steps, client
    assert all(re.fullmatch(r"command|rows \d+\+?|error [0-9A-Z]{5}", s.answer) for s in STATEMENTS)


@pytest.mark.parametrize("statement", STATEMENTS, ids=[f"{s.client}:{s.line}" for s in STATEMENTS])
def test_extended_protocol(students: Any, statement: Statement) -> None:
    with psycopg.connect(students.dsn(), autocommit=True) as conn:
        sqlstate, rows = None, None
        try:
            cursor = conn.execute(statement.sql.encode())  # bytes: no client-side % parsing
            rows = len(cursor.fetchall()) if cursor.description is not None else None
        except psycopg.Error as error:
            sqlstate = error.sqlstate
        _check(statement, sqlstate, rows)
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the session goes on


@pytest.mark.parametrize("statement", STATEMENTS, ids=[f"{s.client}:{s.line}" for s in STATEMENTS])
def test_simple_protocol(students: Any, wire: Any, statement: Statement) -> None:
    client = wire(students)
    reply = client.query(statement.sql)
    errors = reply.errors()
    sqlstate = errors[0]["C"] if errors else None
    has_rows = b"T" in reply.kinds()
    _check(statement, sqlstate, len(reply.rows()) if has_rows else None)
    assert client.query("SELECT 1").rows() == [[b"1"]]


@pytest.fixture
def engine(students: Any) -> Any:
    engine = sa.create_engine(f"postgresql+psycopg://alice:alice-demo@127.0.0.1:{students.port}/statguard")
    yield engine
    engine.dispose()


def test_sqlalchemy_reflects_a_table(engine: Any) -> None:
    table = sa.Table("students", sa.MetaData(), autoload_with=engine)
    assert [(c.name, str(c.type)) for c in table.columns] == [
        ("sex", "TEXT"),
        ("major", "TEXT"),
        ("class", "BIGINT"),
        ("income", "BIGINT"),
    ]
    assert table.comment == "One row per student." and table.columns["income"].comment == "yearly income"
    assert not table.primary_key.columns and not table.indexes and not table.foreign_keys
    qualified = sa.Table("students", sa.MetaData(), schema="public", autoload_with=engine)
    assert qualified.columns.keys() == table.columns.keys()


def test_sqlalchemy_reflects_a_derived_dimension_as_a_text_column(serve: Any) -> None:
    """hospital.yaml derives area from town: a column of the table as analysts see it."""
    endpoint = serve("hospital")
    engine = sa.create_engine(f"postgresql+psycopg://alice:alice-demo@127.0.0.1:{endpoint.port}/statguard")
    try:
        table = sa.Table("hospital", sa.MetaData(), autoload_with=engine)
        with engine.connect() as connection:
            rows = connection.execute(
                sa.text("SELECT area, COUNT(*) AS n FROM hospital WHERE area = 'North' GROUP BY area")
            ).all()
    finally:
        engine.dispose()
    assert [(c.name, str(c.type)) for c in table.columns] == [
        ("town", "TEXT"),
        ("income", "BIGINT"),
        ("area", "TEXT"),
    ]
    assert table.columns["area"].comment == "London sub-region of the town"
    assert [tuple(row) for row in rows] == [("North", 83)]


def test_superset_inspector_calls(engine: Any) -> None:
    inspector = sa.inspect(engine)
    assert inspector.get_schema_names() == ["information_schema", "public"]
    assert inspector.get_table_names("public") == ["students"]
    assert inspector.get_foreign_table_names("public") == []
    assert inspector.get_view_names("public") == [] and inspector.get_materialized_view_names("public") == []
    assert inspector.get_pk_constraint("students", "public")["constrained_columns"] == []
    assert inspector.get_foreign_keys("students", "public") == []
    assert inspector.get_indexes("students", "public") == []
    assert inspector.get_unique_constraints("students", "public") == []
    assert inspector.get_check_constraints("students", "public") == []
    assert inspector.get_table_comment("students", "public") == {"text": "One row per student."}
    assert inspector.has_table("students") and not inspector.has_table("nosuch")


def test_pandas_read_sql_query_and_read_sql_table(engine: Any) -> None:
    sql = "SELECT major, COUNT(*), SUM(income) AS total FROM students GROUP BY major"
    frame = pd.read_sql_query(sql, engine)
    assert list(frame.columns) == ["major", "count", "total"]
    assert list(frame["major"]) == ["CS", "EE"]
    # a table's rows are never released: refused cleanly, with what to send instead
    with pytest.raises(pd.errors.DatabaseError) as caught:
        pd.read_sql_table("students", engine)
    cause = caught.value.__cause__
    assert isinstance(cause, sa.exc.ProgrammingError) and isinstance(cause.orig, psycopg.Error)
    assert cause.orig.sqlstate == "42000" and "aggregate it" in str(cause.orig)


def test_a_failed_catalog_query_names_its_client_and_query(
    students: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="guard.server.pgwire")
    with psycopg.connect(students.dsn(), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UndefinedTable, match=r'relation "pg_catalog\.pg_nosuch" does'):
            conn.execute("SELECT opcname FROM pg_catalog.pg_nosuch\nWHERE true")
        assert conn.execute("SELECT 1").fetchone() == (1,)
    lines = [r.getMessage() for r in caplog.records if "catalog query" in r.getMessage()]
    assert len(lines) == 1
    assert "analyst 'alice' at 127.0.0.1:" in lines[0] and "42P01" in lines[0]
    assert "'SELECT opcname FROM pg_catalog.pg_nosuch\\nWHERE true'" in lines[0]  # escaped, one line


def test_json_keys_bound_as_parameters_are_described_and_answered(students: Any, wire: Any) -> None:
    # SQLAlchemy's column reflection builds JSON with keys bound as parameters: describing
    # the statement before its values are known must not fail (it did, as "JSON key
    # cannot be NULL" in the log and XX000)
    client = wire(students)
    client.parse("SELECT json_build_object($1, c.relname) AS j FROM pg_catalog.pg_class c", types=(25,))
    client.describe(b"S")
    client.bind((b"name",))
    client.execute()
    reply = client.sync()
    assert reply.errors() == []
    assert reply.columns()[0][0] == "j"
    assert reply.rows() == [[b'{"name":"students"}']]


def test_current_setting_of_a_bound_name(students: Any) -> None:
    with psycopg.connect(students.dsn(), autocommit=True) as conn:
        assert conn.execute("SELECT current_setting(%s)", ("default_table_access_method",)).fetchone() == (
            "heap",
        )
        assert conn.execute("SELECT current_setting(%s)", ("TimeZone",)).fetchone() == ("UTC",)
        with pytest.raises(psycopg.errors.UndefinedObject, match="unrecognized configuration parameter"):
            conn.execute("SELECT current_setting(%s)", ("nosuch",))
