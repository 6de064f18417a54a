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
