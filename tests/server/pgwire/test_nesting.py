"""Texts the endpoint reads before the guard does (routing catalog probes, typing
parameters) obey the guard's nesting limits: a deep text is a clean 42000, never an
internal error, over the simple and the extended protocol alike (found by the fuzz
harness: benchmarks/fuzz)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

DEEP = [
    "(" * 72 + "SELECT COUNT(*) FROM students" + ")" * 72,
    "SELECT COUNT(*) FROM students WHERE " + "(" * 68 + "sex = 'Male'" + ")" * 68,
    "SELECT COUNT(*) FROM students WHERE " + "NOT " * 400 + "sex = 'Male'",
    "SELECT COUNT(*) FROM pg_catalog.pg_class WHERE " + "(" * 500 + "1 = 1" + ")" * 500,
]


@pytest.mark.parametrize("sql", DEEP)
@pytest.mark.parametrize("prepare", [False, True])
def test_deep_texts_are_rejected_cleanly(students: Any, sql: str, prepare: bool) -> None:
    with psycopg.connect(students.dsn(), autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as caught:
            conn.execute(sql, prepare=prepare)
        assert caught.value.sqlstate == "42000", caught.value
        assert conn.execute("SELECT COUNT(*) FROM students").fetchone() == (9,)  # the session goes on


def test_text_that_is_not_utf8_is_an_error_and_the_session_goes_on(students: Any) -> None:
    with psycopg.connect(students.dsn(), autocommit=True) as conn:
        result = conn.pgconn.exec_(b"SELECT COUNT(*) FROM students WHERE sex = 'E\xed\xa0\x80'")
        assert result.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"22021"
        assert conn.execute("SELECT COUNT(*) FROM students").fetchone() == (9,)


def test_a_huge_placeholder_number_is_rejected_without_allocating(students: Any) -> None:
    """$99999999999999999999 once made the endpoint allocate a parameter list that long
    (gigabytes; found by the fuzz harness)."""
    sql = b"SELECT COUNT(*) FROM students WHERE sex = $99999999999999999999"
    field = psycopg.pq.DiagnosticField.SQLSTATE
    with psycopg.connect(students.dsn(), autocommit=True) as conn:
        executed = conn.pgconn.exec_params(sql, [b"EE"])
        # the endpoint counts no placeholder past $65535, so the value does not fit: 08P01,
        # as PostgreSQL answers a Bind with the wrong number of values
        assert executed.error_field(field) in (b"42000", b"08P01")
        prepared = conn.pgconn.prepare(b"huge", sql)
        assert prepared.error_field(field) in (None, b"42000")
        assert conn.execute("SELECT COUNT(*) FROM students").fetchone() == (9,)


def test_non_utf8_text_is_logged_as_rejected(students: Any) -> None:
    with psycopg.connect(students.dsn(), autocommit=True) as conn:
        conn.pgconn.exec_(b"SELECT COUNT(*) FROM students WHERE sex = 'E\xed\xa0\x80' /* bad bytes */")
        conn.execute("SELECT COUNT(*) FROM students")  # a round trip: the log row is written
    rows = [r for r in students.guard.log() if "bad bytes" in (r["sql"] or "")]
    assert len(rows) == 1 and rows[0]["decision"] == "rejected" and rows[0]["analyst"] == "alice"


def test_an_unparsable_prepared_text_with_parameters_reaches_the_guard_and_is_logged(students: Any) -> None:
    sql = b"select sum(income) fom students where class = $1 /* unparsable */"
    with psycopg.connect(students.dsn(), autocommit=True) as conn:
        result = conn.pgconn.exec_params(sql, [b"1979"])
        assert result.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"42000"
    rows = [r for r in students.guard.log() if "unparsable" in (r["sql"] or "")]
    assert len(rows) == 1 and rows[0]["decision"] == "rejected"


def test_a_parameter_value_refused_at_bind_is_logged(students: Any) -> None:
    sql = b"SELECT COUNT(*) FROM students WHERE class = $1 /* bad value */"
    with psycopg.connect(students.dsn(), autocommit=True) as conn:
        result = conn.pgconn.exec_params(sql, [b"EE'; DROP TABLE students; --"])
        assert result.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"22P02"
        conn.execute("SELECT COUNT(*) FROM students")
    rows = [r for r in students.guard.log() if "bad value" in (r["sql"] or "")]
    assert len(rows) == 1 and rows[0]["decision"] == "rejected"
