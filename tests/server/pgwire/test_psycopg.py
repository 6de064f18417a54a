"""psycopg 3 (libpq): simple, parameterised, prepared and binary queries; refusals as
SQLSTATEs; protection notes as notices; login failures."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus


def test_simple_query_types_follow_the_engine(students: Any) -> None:
    with psycopg.connect(students.dsn(), autocommit=True) as conn:
        cur = conn.execute("SELECT major, SUM(income), AVG(income), COUNT(*) FROM students GROUP BY major")
        assert cur.fetchall() == [("CS", Decimal(358000), 71600.0, 5), ("EE", Decimal(240000), 60000.0, 4)]
        assert [(c.name, c.type_code) for c in cur.description] == [
            ("major", 25),  # VARCHAR -> text
            ("sum", 1700),  # SUM(BIGINT) is HUGEINT -> numeric
            ("avg", 701),  # float8
            ("count", 20),  # int8
        ]


def test_parameterised_query_binds_values_not_text(students: Any) -> None:
    with psycopg.connect(students.dsn(), autocommit=True) as conn:
        before = students.log_size()
        # Parse, Bind, Describe (runs it), Execute (sends that answer): one request to the guard
        assert conn.execute("SELECT COUNT(*) FROM students WHERE sex = %s", ("Male",)).fetchone() == (6,)
        assert students.log_size() == before + 1
        # a value that would change the statement if spliced stays one string literal
        with pytest.raises(psycopg.Error):
            conn.execute("SELECT COUNT(*) FROM students WHERE sex = %s", ("x' OR sex <> 'x",))
        logged = students.guard.log()[-1]
        assert logged["sql"].endswith("WHERE sex = 'x'' OR sex <> ''x'")
        assert "OR is not allowed" not in (logged["reason"] or "")
        # a parameter compared with an integer column is read as an integer
        with pytest.raises(pg_errors.InvalidTextRepresentation):
            conn.execute("SELECT COUNT(*) FROM students WHERE class = %s", ("1978 OR 1=1",))


def test_prepared_statement_is_reused(serve: Callable[..., Any]) -> None:
    castro = serve("castro")
    sql = "SELECT profession, SUM(salary) FROM castro WHERE municipality = %s GROUP BY profession"
    with psycopg.connect(castro.dsn(), autocommit=True, prepare_threshold=None) as conn:
        # the first execute parses a named statement, the second only binds it again
        first = conn.execute(sql, ("M2",), prepare=True).fetchall()
        second = conn.execute(sql, ("M2",), prepare=True).fetchall()
        other = conn.execute(sql, ("M3",), prepare=True).fetchall()
    assert first == second and len(first) == 5
    assert other != first
    assert [entry["decision"] for entry in castro.guard.log()] == ["answered"] * 3


def test_refused_query_carries_42501_and_the_guards_reason(students: Any) -> None:
    with psycopg.connect(students.dsn(), autocommit=True) as conn, pytest.raises(psycopg.Error) as caught:
        conn.execute("SELECT SUM(income) FROM students WHERE sex = 'Female' AND major = 'EE'")
    logged = students.guard.log()[-1]
    assert logged["decision"] == "refused"
    assert caught.value.sqlstate == "42501"
    assert caught.value.diag.message_primary == logged["reason"]


def test_rejected_query_carries_42000_and_the_guards_reason(students: Any) -> None:
    with psycopg.connect(students.dsn(), autocommit=True) as conn, pytest.raises(psycopg.Error) as caught:
        conn.execute("SELECT name FROM students")
    assert caught.value.sqlstate == "42000"
    assert caught.value.diag.message_primary == students.guard.log()[-1]["reason"]
    assert "identifies respondents" in str(caught.value)


def test_suppressed_cells_are_null_and_notes_are_notices(students: Any) -> None:
    notices: list[str] = []
    with psycopg.connect(students.dsn(), autocommit=True) as conn:
        # the margins first (whatever ran before on this module's server): released, they
        # make the table's male cells complements of its suppressed female ones
        conn.execute("SELECT major, SUM(income) FROM students GROUP BY major").fetchall()
        conn.add_notice_handler(lambda diagnostic: notices.append(diagnostic.message_primary or ""))
        rows = conn.execute("SELECT sex, major, SUM(income) FROM students GROUP BY sex, major").fetchall()
    assert [row[2] for row in rows] == [None, None, None, None]
    assert [row[:2] for row in rows] == [("Female", "CS"), ("Female", "EE"), ("Male", "CS"), ("Male", "EE")]
    assert notices == students.guard.log()[-1]["notes"]
    assert any("suppressed by the query-set-size control" in n for n in notices)


def test_binary_results_decode_to_the_same_values(students: Any) -> None:
    sql = "SELECT major, SUM(income), AVG(income), COUNT(*) FROM students GROUP BY major"
    with psycopg.connect(students.dsn(), autocommit=True) as conn:
        text = conn.execute(sql).fetchall()
        binary = conn.cursor(binary=True).execute(sql).fetchall()
    assert binary == text


def test_binary_parameters(students: Any) -> None:
    with psycopg.connect(students.dsn(), autocommit=True) as conn:
        cur = conn.cursor(binary=True)
        assert cur.execute("SELECT COUNT(*) FROM students WHERE class >= %b", (1979,)).fetchone() == (5,)


def test_transaction_block_and_aborted_state(students: Any) -> None:
    with psycopg.connect(students.dsn()) as conn:  # not autocommit: psycopg sends BEGIN
        assert conn.execute("SELECT COUNT(*) FROM students").fetchone() == (9,)
        assert conn.info.transaction_status is TransactionStatus.INTRANS
        with pytest.raises(pg_errors.SyntaxErrorOrAccessRuleViolation):
            conn.execute("SELECT x FROM nosuch")
        assert conn.info.transaction_status is TransactionStatus.INERROR
        with pytest.raises(pg_errors.InFailedSqlTransaction):
            conn.execute("SELECT COUNT(*) FROM students")
        conn.rollback()
        assert conn.info.transaction_status is TransactionStatus.IDLE
        assert conn.execute("SELECT COUNT(*) FROM students").fetchone() == (9,)


@pytest.mark.parametrize("user", ["alice", "mallory"])
def test_wrong_password_and_unknown_analyst_fail_alike(students: Any, user: str) -> None:
    with pytest.raises(psycopg.OperationalError) as caught:
        psycopg.connect(students.dsn(user=user, password="guess"))
    assert f'password authentication failed for user "{user}"' in str(caught.value)


def test_wrong_database_is_refused(students: Any) -> None:
    with pytest.raises(psycopg.OperationalError) as caught:
        psycopg.connect(students.dsn(dbname="postgres"))
    assert 'database "postgres" does not exist' in str(caught.value)


def test_startup_parameters_and_session_commands(students: Any) -> None:
    with psycopg.connect(students.dsn(application_name="probe"), autocommit=True) as conn:
        assert conn.info.parameter_status("server_version") == "16.0 (statguard)"
        assert conn.info.parameter_status("standard_conforming_strings") == "on"
        assert conn.info.parameter_status("application_name") == "probe"
        assert conn.info.server_version == 160000
        conn.execute("SET application_name = 'renamed'")
        assert conn.info.parameter_status("application_name") == "renamed"
        assert conn.execute("SHOW application_name").fetchone() == ("renamed",)
        assert conn.execute("SHOW TIME ZONE").fetchone() == ("UTC",)
        assert conn.execute("SELECT current_user, current_database()").fetchone() == ("alice", "statguard")
        with pytest.raises(pg_errors.InsufficientPrivilege):
            conn.execute("SET ROLE bob")
        with pytest.raises(psycopg.Error) as caught:
            conn.execute("SET client_encoding = 'LATIN1'")
        assert caught.value.sqlstate == "22023"
