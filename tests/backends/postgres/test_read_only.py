"""The query role: refused when it could do more than read; every query read-only."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from sqlglot import exp

from guard import Guard
from guard.backends.postgres_backend import PostgresBackend
from guard.errors import BackendError, PolicyError
from tests.backends.pg_server import OWNER, READER, PostgresServer


@pytest.fixture
def students(pg_policy: Callable[..., Path], tmp_path: Path) -> Iterator[Guard]:
    with Guard.open(pg_policy("students"), state=tmp_path / "state") as guard:
        yield guard


@pytest.fixture
def role(postgres_server: PostgresServer, schema: str) -> Iterator[str]:
    """A fresh LOGIN role, dropped after the test."""
    name = f"role_{schema}"
    postgres_server.run_sql(f"CREATE ROLE {name} LOGIN")
    yield name
    postgres_server.run_sql(f"DROP OWNED BY {name}", f"DROP ROLE {name}")


def _open_as(pg_policy: Callable[..., Path], server: PostgresServer, role: str, tmp_path: Path) -> Guard:
    return Guard.open(pg_policy("students", dsn=server.dsn(role)), state=tmp_path / "state")


def test_superuser_refused(
    pg_policy: Callable[..., Path], postgres_server: PostgresServer, tmp_path: Path
) -> None:
    with pytest.raises(
        PolicyError, match=r"backend.dsn: the query role postgres is a superuser; give backend.dsn"
    ):
        _open_as(pg_policy, postgres_server, "postgres", tmp_path)


def test_role_reaching_a_superuser_refused(
    pg_policy: Callable[..., Path], postgres_server: PostgresServer, role: str, tmp_path: Path
) -> None:
    # a slipped set_config('role', ...) would act as the role it can become
    postgres_server.run_sql(f"CREATE ROLE admin_{role} SUPERUSER NOLOGIN", f"GRANT admin_{role} TO {role}")
    try:
        with pytest.raises(PolicyError, match=rf"is a superuser \(through role admin_{role}\)"):
            _open_as(pg_policy, postgres_server, role, tmp_path)
    finally:
        postgres_server.run_sql(f"DROP ROLE admin_{role}")


@pytest.mark.parametrize("granted", ["pg_read_server_files", "pg_execute_server_program"])
def test_server_file_roles_refused(
    pg_policy: Callable[..., Path], postgres_server: PostgresServer, role: str, tmp_path: Path, granted: str
) -> None:
    postgres_server.run_sql(f"GRANT {granted} TO {role}")
    with pytest.raises(PolicyError, match=rf"is a member of {granted}, which reach the server's files"):
        _open_as(pg_policy, postgres_server, role, tmp_path)


def test_role_that_may_write_the_snapshot_refused(
    pg_policy: Callable[..., Path], postgres_server: PostgresServer, schema: str, role: str, tmp_path: Path
) -> None:
    Guard.open(pg_policy("students"), state=tmp_path / "state").close()
    postgres_server.run_sql(f"GRANT INSERT ON ALL TABLES IN SCHEMA {schema} TO {role}", role=OWNER)
    with pytest.raises(
        PolicyError, match=rf"backend.dsn: the query role may write to {schema}\._guard_tables"
    ):
        _open_as(pg_policy, postgres_server, role, tmp_path)


def test_role_that_may_create_in_the_schema_refused(
    pg_policy: Callable[..., Path], postgres_server: PostgresServer, schema: str, role: str, tmp_path: Path
) -> None:
    Guard.open(pg_policy("students"), state=tmp_path / "state").close()
    postgres_server.run_sql(f"GRANT CREATE ON SCHEMA {schema} TO {role}", role=OWNER)
    with pytest.raises(PolicyError, match=rf"may create in schema {schema}; it must only read"):
        _open_as(pg_policy, postgres_server, role, tmp_path)


def test_owner_as_query_role_refused(
    pg_policy: Callable[..., Path], postgres_server: PostgresServer, tmp_path: Path
) -> None:
    with pytest.raises(PolicyError, match=r"backend.dsn: the query role may create in (the database|schema)"):
        _open_as(pg_policy, postgres_server, OWNER, tmp_path)


def test_write_statement_refused(students: Guard) -> None:
    insert = exp.insert("VALUES (1)", "students")
    with pytest.raises(BackendError, match="runs queries only, not INSERT statements"):
        students.backend.execute(insert)


def test_connection_is_read_only(students: Guard) -> None:
    """Even SQL that bypassed the guard's checks could not write or run two statements."""
    backend = students.backend
    assert isinstance(backend, PostgresBackend)
    con = backend._borrow()
    try:
        for statement in (
            "CREATE TEMP TABLE leak (a integer)",
            "SET TRANSACTION READ WRITE",
            "SELECT pg_read_file('/etc/passwd')",
        ):
            with pytest.raises(psycopg.Error), con.transaction():
                con.execute("SELECT 1")
                con.execute(statement)
        with pytest.raises(psycopg.Error, match="multiple commands"), con.transaction():
            con.execute("SELECT 1; SELECT 2", prepare=True)
        assert con.execute("SHOW default_transaction_read_only").fetchone() == ("on",)
    finally:
        backend._give_back(con)


@pytest.mark.parametrize(
    "query",
    [
        exp.select("*").from_("pg_authid"),
        exp.select("*").from_(exp.to_table("pg_catalog.pg_roles")),
        exp.select("*").from_("students").join("castro", on="true"),
        exp.select("*").from_(exp.Table(this=exp.Anonymous(this="generate_series", expressions=["1", "2"]))),
    ],
)
def test_undeclared_table_refused(students: Guard, query: exp.Expr) -> None:
    with pytest.raises(BackendError, match="which is not a table of the policy; only declared tables"):
        students.backend.execute(query)


def test_common_table_expressions_are_not_tables(students: Guard) -> None:
    query = (
        exp.select("n").from_("counted").with_("counted", as_=exp.select("COUNT(*) AS n").from_("students"))
    )
    assert students.backend.execute(query).rows == [(9,)]


def test_engine_errors_carry_no_detail(students: Guard) -> None:
    with pytest.raises(BackendError, match=r"^the data engine failed: division by zero$"):
        students.backend.execute(exp.select("SUM(income / (class - class))").from_("students"))


@pytest.mark.parametrize(
    "dsn",
    [
        "host=127.0.0.1 port=1 user=reader password=hunter2secret connect_timeout=2",
        "postgresql://reader:hunter2secret@127.0.0.1:1/db?connect_timeout=2",
        "postgresql://reader:hunter2secret@127.0.0.1:notaport/db",
        "host=127.0.0.1 password='hunter2secret",
    ],
)
def test_password_never_in_messages(pg_policy: Callable[..., Path], tmp_path: Path, dsn: str) -> None:
    with pytest.raises((BackendError, PolicyError)) as caught:
        Guard.open(pg_policy("students", dsn=dsn), state=tmp_path / "state")
    assert "hunter2secret" not in str(caught.value) and "backend.dsn" in str(caught.value)


def test_reader_role_has_no_other_rights(postgres_server: PostgresServer) -> None:
    """The test cluster's reader starts with nothing: every grant comes from the owner."""
    with postgres_server.connect(READER) as con:
        row = con.execute(
            "SELECT rolsuper, rolcreaterole FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
    assert row == (False, False)


def test_values_are_plain(students: Guard) -> None:
    """Percent signs are SQL, not placeholders; numerics and arrays come back as plain Python."""
    query = (
        exp.select(
            "COUNT(*)",
            "SUM(income)",
            "AVG(income)",
            "ARRAY_AGG(income ORDER BY income)",
            "ROUND(AVG(income), 1)",
        )
        .from_("students")
        .where("major LIKE '%E%' AND income % 2 = 0")
    )
    ((count, total, mean, values, rounded),) = students.backend.execute(query).rows
    assert (count, total, mean, rounded) == (4, 240000, 60000.0, 60000.0)
    assert values == sorted(values) and all(type(v) is int for v in values) and len(values) == 4
