"""End to end: the guard on Spark gives the DuckDB guard's answers, suppression included."""

from __future__ import annotations

from pathlib import Path

import pytest

from guard import Guard
from guard.errors import GuardError

pytest.importorskip("pyspark")

#: per example policy, queries run in order on both engines (history makes order matter)
QUERIES = {
    "students": [
        "SELECT major, SUM(income) FROM students GROUP BY major",
        "SELECT major, AVG(income) AS mean FROM students GROUP BY major",
        "SELECT sex, major, COUNT(*) AS n, SUM(income) AS s FROM students GROUP BY sex, major",
        "SELECT sex, COUNT(*) FROM students WHERE class <> 1979 GROUP BY sex",
        "SELECT COUNT(*) FROM students WHERE major = 'EE' AND sex = 'Female'",
    ],
    "castro": [
        "SELECT municipality, SUM(salary) FROM castro GROUP BY municipality",
        "SELECT profession, municipality, SUM(salary) FROM castro GROUP BY CUBE (profession, municipality)",
        "SELECT municipality, profession, COUNT(*) AS n FROM castro GROUP BY municipality, profession",
    ],
    "hospital": [
        "SELECT town, COUNT(*), SUM(income) FROM hospital GROUP BY town",
        "SELECT COUNT(*) FROM hospital WHERE income > 3000",
    ],
}


def _answer(guard: Guard, sql: str) -> object:
    try:
        result = guard.query(sql, analyst="alice")
    except GuardError as exc:
        return (exc.kind, exc.message)
    return result.rows


@pytest.mark.parametrize("name", list(QUERIES))
def test_same_answers_as_duckdb(policies: Path, tmp_path: Path, name: str) -> None:
    policy = policies / f"{name}.yaml"
    with (
        Guard.open(policy, state=tmp_path / "spark", backend="spark") as on_spark,
        Guard.open(policy, state=tmp_path / "duckdb", backend="duckdb") as on_duckdb,
    ):
        for sql in QUERIES[name]:
            assert _answer(on_spark, sql) == _answer(on_duckdb, sql), sql
