"""Bound parameters become literal nodes before validation, never text."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlglot import exp

from guard.core import Guard
from guard.errors import QueryRejected
from guard.policy.model import Limits
from guard.query.parse import parse


def _where(sql: str, parameters: list[object] | None) -> str:
    tree = parse(sql, Limits(), parameters)  # type: ignore[arg-type]
    where = tree.find(exp.Where)
    assert where is not None
    return where.this.sql(dialect="duckdb")


def test_numbered_parameters_take_their_positions() -> None:
    sql = "SELECT SUM(income) FROM students WHERE major = $2 AND class = $1"
    assert _where(sql, [1980, "EE"]) == "major = 'EE' AND class = 1980"


def test_question_marks_take_values_in_order() -> None:
    assert _where("SELECT COUNT(*) FROM t WHERE a = ? AND b = ?", ["x", 2]) == "a = 'x' AND b = 2"


def test_an_injection_attempt_stays_one_string_literal() -> None:
    text = "EE' OR '1'='1"
    tree = parse("SELECT COUNT(*) FROM t WHERE major = $1", Limits(), [text])
    literals = [n for n in tree.find_all(exp.Literal) if n.is_string]
    assert [n.this for n in literals] == [text]
    assert not list(tree.find_all(exp.Or))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "a = NULL"),
        (True, "a = TRUE"),
        (2.5, "a = 2.5"),
        (dt.date(2020, 1, 2), "a = CAST('2020-01-02' AS DATE)"),
    ],
)
def test_value_types(value: object, expected: str) -> None:
    assert _where("SELECT COUNT(*) FROM t WHERE a = $1", [value]) == expected


@pytest.mark.parametrize(
    ("sql", "parameters", "message"),
    [
        ("SELECT COUNT(*) FROM t WHERE a = $1", None, "no parameter values"),
        ("SELECT COUNT(*) FROM t WHERE a = $2", ["x"], "uses 2 parameter"),
        ("SELECT COUNT(*) FROM t", ["x"], "has no placeholder"),
        ("SELECT COUNT(*) FROM t WHERE a = $1 AND b = ?", ["x", "y"], "mixes"),
        ("SELECT COUNT(*) FROM t WHERE a = $1", [float("nan")], "not a finite number"),
        ("SELECT COUNT(*) FROM t WHERE a = $1", [b"raw"], "has type bytes"),
    ],
)
def test_parameters_that_do_not_fit_are_rejected(
    sql: str, parameters: list[object] | None, message: str
) -> None:
    with pytest.raises(QueryRejected, match=message):
        parse(sql, Limits(), parameters)  # type: ignore[arg-type]


def test_the_log_keeps_the_bound_sql(students: Guard) -> None:
    students.query("SELECT major, SUM(income) FROM students WHERE sex = $1 GROUP BY major", "alice", ["Male"])
    assert students.log()[-1]["sql"].endswith("WHERE sex = 'Male' GROUP BY major")


def test_a_parameter_that_is_not_valid_unicode_is_rejected_not_an_engine_error(students: Guard) -> None:
    with pytest.raises(QueryRejected, match=r"parameter \$1 is not valid Unicode"):
        students.query(
            "SELECT COUNT(*) FROM students WHERE sex = $1", analyst="alice", parameters=["E\udc80"]
        )
    assert students.log()[-1]["decision"] == "rejected"
