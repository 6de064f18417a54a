"""Stages 1-3 have one home: the guard, the PostgreSQL Describe and the offline audit
read SQL through the same function, so they accept and refuse alike, word for word."""

from __future__ import annotations

import pytest

from guard import Guard, GuardError
from guard.audit.cellsets import GuardCells
from guard.audit.logsource import LogEntry
from guard.query.front import Trace, read_query, visible_tables
from guard.query.parse import MAX_NESTING, MAX_TREE_DEPTH
from guard.server.pgwire.describe import guard_columns

REFUSED_BY_THE_FRONT = [
    "SELECT * FROM students",
    "SELECT name, COUNT(*) FROM students GROUP BY name",
    "SELECT COUNT(*) FROM students WHERE income > 50000",
    "SELECT COUNT(*) FROM read_csv('/etc/passwd')",
    "SELECT COUNT(*) FROM nowhere",
    "SELECT COUNT(*) FROM students; SELECT 1",
    "SELECT COUNT(*) FROM students WHERE major = "
    + "(" * (MAX_NESTING + 1)
    + "'EE'"
    + ")" * (MAX_NESTING + 1),
    "SELECT COUNT(*) FROM students WHERE " + " AND ".join(["major = 'EE'"] * (MAX_TREE_DEPTH + 5)),
    "SELECT COUNT(*) FROM students WHERE major = '\ud800'",
    "",
]


def _message(call: object) -> str:
    assert callable(call)
    with pytest.raises(GuardError) as caught:
        call()
    return caught.value.message


@pytest.mark.parametrize("sql", REFUSED_BY_THE_FRONT)
def test_every_caller_refuses_with_the_same_message(students: Guard, sql: str) -> None:
    by_guard = _message(lambda: students.query(sql, analyst="alice"))
    by_describe = _message(lambda: guard_columns(students, "alice", sql, None))
    cells = GuardCells(students.policy, students.backend)
    entry = LogEntry(seq=1, ref="test", analyst="alice", time=None, sql=sql)
    by_audit = _message(lambda: cells.cells(entry))
    assert by_guard == by_describe == by_audit
    assert students.log()[-1]["decision"] == "rejected"  # and the guard logged it


def test_deep_nesting_is_a_clean_rejection_that_is_logged(students: Guard) -> None:
    for depth in (50, 500, 5000):
        sql = "SELECT COUNT(*) FROM students WHERE major = " + "(" * depth + "'EE'" + ")" * depth
        message = _message(lambda sql=sql: students.query(sql, analyst="alice"))  # type: ignore[misc]
        assert f"deeper than {MAX_NESTING}" in message
    assert [r["decision"] for r in students.log()[-3:]] == ["rejected"] * 3


def test_nesting_up_to_the_limit_is_answered(students: Guard) -> None:
    sql = "SELECT COUNT(*) FROM students WHERE major = " + "(" * MAX_NESTING + "'EE'" + ")" * MAX_NESTING
    assert students.query(sql, analyst="alice").rows == [[4]]


def test_a_lone_surrogate_is_rejected_and_logged_escaped(students: Guard) -> None:
    with pytest.raises(GuardError, match="not valid Unicode"):
        students.query("SELECT COUNT(*) FROM students WHERE major = '\ud800'", analyst="alice")
    record = students.log()[-1]
    assert record["decision"] == "rejected" and "\\ud800" in record["sql"]


def test_visible_tables_hide_what_the_analyst_may_not_query(students: Guard) -> None:
    policy = students.policy
    assert visible_tables(policy, None) == policy.tables
    alice = policy.analyst("alice")
    assert alice is not None
    assert all(alice.may_query(t.name) for t in visible_tables(policy, alice))


def test_trace_keeps_what_a_failing_request_got_to(students: Guard) -> None:
    trace = Trace()
    with pytest.raises(GuardError):
        read_query(
            "SELECT name, COUNT(*) FROM students WHERE major = $1 GROUP BY name",
            students.policy,
            None,
            lambda name: students.backend.table_info(name).types,
            ["EE"],
            trace,
        )
    assert trace.table is not None and trace.table.name == "students"
    assert trace.bound_sql is not None and "'EE'" in trace.bound_sql


def test_a_parser_fault_is_a_rejection(students: Guard) -> None:
    """sqlglot raises IndexError on SHOW ALL (found by the fuzz harness)."""
    with pytest.raises(GuardError, match="the SQL parser failed on it"):
        students.query("SHOW ALL", analyst="alice")
    assert students.log()[-1]["decision"] == "rejected"
