"""Every request reaches the log, whatever fails, and what outsiders sent is stored bounded."""

from __future__ import annotations

import hashlib

import pytest

import guard.core
from guard import Guard
from guard.errors import InternalError, QueryRefused, QueryRejected, codes_for
from guard.state.recorder import LOGGED_SQL_LIMIT, logged_text, outcome_of
from guard.state.records import Outcome


def test_outcomes_follow_the_error_classes() -> None:
    assert outcome_of(QueryRejected("x")) is Outcome.REJECTED
    assert outcome_of(QueryRefused("x")) is Outcome.REFUSED
    assert outcome_of(InternalError("x")) is Outcome.ERROR
    assert outcome_of(ZeroDivisionError()) is Outcome.ERROR


def test_long_text_keeps_a_prefix_and_a_digest() -> None:
    text = "SELECT " + "x" * (3 * LOGGED_SQL_LIMIT)
    kept = logged_text(text)
    assert kept.startswith(text[:LOGGED_SQL_LIMIT]) and len(kept) < LOGGED_SQL_LIMIT + 200
    assert hashlib.sha256(text.encode()).hexdigest() in kept
    assert logged_text("SELECT 1") == "SELECT 1"
    assert logged_text("a\ud800b") == "a\\ud800b"


def test_an_unexpected_fault_is_logged_as_an_internal_error(
    students: Guard, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object, **__: object) -> None:
        # letters no hex hash holds (4242 once appeared in a record's random hash)
        raise ZeroDivisionError("a secret value zebra the engine quoted")

    monkeypatch.setattr(guard.core, "protect_with_decision", broken)
    with pytest.raises(InternalError) as caught:
        students.query("SELECT major, COUNT(*) FROM students GROUP BY major", analyst="alice")
    assert codes_for(caught.value).sqlstate == "XX000" and codes_for(caught.value).http_status == 500
    record = students.log()[-1]
    assert caught.value.message.endswith("report it to the data steward")
    assert f"#{record['id']}" in caught.value.message
    assert record["decision"] == "error" and record["error"] == "InternalError"
    assert "zebra" not in caught.value.message and "zebra" not in str(record)
    # the guard goes on answering
    monkeypatch.undo()
    assert students.query("SELECT COUNT(*) FROM students", analyst="alice").rows == [[9]]


def test_a_huge_rejected_query_does_not_grow_the_log_by_its_size(students: Guard) -> None:
    sql = "SELECT COUNT(*) FROM students WHERE major = '" + "E" * 2_000_000 + "'"
    with pytest.raises(QueryRejected, match="characters long"):
        students.query(sql, analyst="alice")
    record = students.log()[-1]
    assert record["decision"] == "rejected" and len(record["sql"]) < LOGGED_SQL_LIMIT + 200


ROLLUP_GROUPING = (
    "SELECT sex, major, GROUPING(sex) AS gs, GROUPING(major) AS gm, COUNT(*) AS n FROM students "
    "GROUP BY ROLLUP (sex, major) ORDER BY n DESC LIMIT 4"
)


def test_the_log_keeps_each_sent_rows_grouping_set(students: Guard) -> None:
    result = students.query(ROLLUP_GROUPING, analyst="alice")
    plain = students.query("SELECT major, COUNT(*) FROM students GROUP BY major", analyst="alice")
    rolled, grouped = students.log()
    # the rows sent, in the order sent (LIMIT applied): the GROUPING() outputs say the same
    from_grouping = [
        [k for k, up in (("sex", gs), ("major", gm)) if not up] for _, _, gs, gm, _ in result.rows
    ]
    assert [rolled["levels"]["sets"][i] for i in rolled["levels"]["rows"]] == from_grouping
    assert len(set(map(tuple, from_grouping))) > 1 and len(result.rows) == 4
    assert grouped["levels"] is None  # one grouping set: a row's keys say its cell
    # the analyst's answer does not carry them
    assert "levels" not in result.to_dict() and "levels" not in plain.to_dict()
