"""The session setting statguard.flags: a text column <label>_flag after each aggregate
column, in simple and extended queries (RowDescription and statement Describe alike);
and lists of a dimension's values through the endpoint."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import errors as pg_errors

TEXT, INT8, NUMERIC = 25, 20, 1700
BY_MAJOR_SEX = "SELECT major, sex, COUNT(*), SUM(income) FROM students GROUP BY major, sex"


def test_flag_columns_follow_each_aggregate_after_set(students: Any) -> None:
    with psycopg.connect(students.dsn(), autocommit=True) as conn:
        assert conn.execute("SHOW statguard.flags").fetchone() == ("off",)
        plain = conn.execute(BY_MAJOR_SEX)
        assert [c.name for c in plain.description] == ["major", "sex", "count", "sum"]
        conn.execute("SET statguard.flags = on")
        assert conn.execute("SHOW statguard.flags").fetchone() == ("on",)
        cur = conn.execute(BY_MAJOR_SEX)
        rows = cur.fetchall()
        described = [(c.name, c.type_code) for c in cur.description]
    assert described == [
        ("major", TEXT),
        ("sex", TEXT),
        ("count", INT8),
        ("count_flag", TEXT),
        ("sum", NUMERIC),
        ("sum_flag", TEXT),
    ]
    # the same question asked of the library: the flag columns are its cell flags
    result = students.guard.query(BY_MAJOR_SEX, "alice")
    assert [list(row) for row in rows] == result.with_flag_columns().rows
    for row, flags in zip(rows, result.flags, strict=True):
        assert (row[3], row[5]) == (flags[2], flags[3])
        for value, flag in ((row[2], row[3]), (row[4], row[5])):
            assert (value is None) == (flag == "suppressed")
    assert {row[3] for row in rows} == {"released", "suppressed"}


def test_flags_off_again_and_invalid_values(students: Any) -> None:
    with psycopg.connect(students.dsn(), autocommit=True) as conn:
        conn.execute("SET statguard.flags TO true")
        assert conn.execute("SHOW statguard.flags").fetchone() == ("on",)
        conn.execute("SET statguard.flags = off")
        cur = conn.execute("SELECT major, COUNT(*) FROM students GROUP BY major")
        assert [c.name for c in cur.description] == ["major", "count"]
        with pytest.raises(pg_errors.InvalidParameterValue, match="Boolean"):
            conn.execute("SET statguard.flags = maybe")
        conn.execute("SET statguard.flags = on")
        conn.execute("RESET statguard.flags")
        assert conn.execute("SHOW statguard.flags").fetchone() == ("off",)


def test_flags_at_startup_and_in_prepared_statements(students: Any) -> None:
    sql = "SELECT sex, COUNT(*) FROM students WHERE major = %s GROUP BY sex"
    with psycopg.connect(students.dsn(options="'-c statguard.flags=on'"), autocommit=True) as conn:
        cur = conn.execute(sql, ("EE",), prepare=True)
        assert [(c.name, c.type_code) for c in cur.description] == [
            ("sex", TEXT),
            ("count", INT8),
            ("count_flag", TEXT),
        ]
        assert cur.fetchall() == [("Female", None, "suppressed"), ("Male", 3, "released")]
        # binary results: the flag column is text, which has a binary form too
        cur = conn.cursor(binary=True)
        cur.execute(sql, ("EE",), prepare=True)
        assert cur.fetchall() == [("Female", None, "suppressed"), ("Male", 3, "released")]


def test_statement_describe_has_the_flag_columns(students: Any, wire: Callable[..., Any]) -> None:
    client = wire(students)
    assert not client.query("SET statguard.flags = on").errors()
    before = students.log_size()
    client.parse("SELECT major, AVG(income) FROM students WHERE sex = $1 GROUP BY major")
    client.describe(b"S")
    reply = client.sync()
    assert [(name, oid) for name, oid, _ in reply.columns()] == [
        ("major", TEXT),
        ("avg", 701),
        ("avg_flag", TEXT),
    ]
    assert students.log_size() == before  # a Describe runs nothing
    client.bind((b"Female",))
    client.execute()
    reply = client.sync()
    assert reply.rows() == [[b"CS", None, b"suppressed"], [b"EE", None, b"suppressed"]]


def test_listing_values_through_the_endpoint(serve: Callable[..., Any], wire: Callable[..., Any]) -> None:
    # a fresh state: after counts by major and sex, a count by major would complete a
    # small group, and a list of majors (asked as that count) would be withheld too
    students = serve("students")
    with psycopg.connect(students.dsn(), autocommit=True) as conn:
        conn.execute("SET statguard.flags = on")  # a list has no aggregate: nothing to flag
        cur = conn.execute("SELECT DISTINCT class FROM students ORDER BY class")
        assert [c.name for c in cur.description] == ["class"]
        assert cur.fetchall() == [(1978,)]  # 1979, 1980, 1981: fewer than k=3 students
        notices: list[str] = []
        conn.add_notice_handler(lambda n: notices.append(n.message_primary or ""))
        listed = conn.execute("SELECT sex, major FROM students GROUP BY sex, major").fetchall()
        assert listed == [("Male", "CS"), ("Male", "EE")]  # women: 2 in CS, 1 in EE
        assert any("2 of 4 values not listed" in n for n in notices), notices
    client = wire(students)
    client.parse("SELECT DISTINCT major FROM students WHERE sex = $1")
    client.describe(b"S")
    assert [(name, oid) for name, oid, _ in client.sync().columns()] == [("major", TEXT)]
    logged = students.guard.log()[-1]
    assert logged["sql"] == "SELECT sex, major FROM students GROUP BY sex, major"
    assert logged["columns"] == ["sex", "major"] and logged["rows"] == [["Male", "CS"], ["Male", "EE"]]


def test_flag_columns_never_repeat_a_column_name(students: Any) -> None:
    """An alias that is already <label>_flag gets a numbered flag column, in the rows
    and in the statement's description alike: a tabular client never sees two columns
    of one name."""
    sql = "SELECT major, SUM(income) AS s, COUNT(*) AS s_flag FROM students GROUP BY major"
    with psycopg.connect(students.dsn(), autocommit=True, options="-c statguard.flags=on") as conn:
        cur = conn.execute(sql, prepare=True)
        names = [c.name for c in cur.description]
        rows = cur.fetchall()
    assert names == ["major", "s", "s_flag_2", "s_flag", "s_flag_flag"]
    assert len(set(names)) == len(names)
    assert [list(row) for row in rows] == students.guard.query(sql, "alice").with_flag_columns().rows
