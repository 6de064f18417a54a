"""Queries through the PostgreSQL back-end: the DuckDB guard's answers, from many threads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlglot import exp

from guard import Guard
from guard.backends.postgres_backend import PostgresBackend
from guard.errors import GuardError
from guard.noise.sampling import InsecureSeededSource

QUERIES = [
    ("students", "SELECT major, SUM(income) FROM students GROUP BY major"),
    ("students", "SELECT major, AVG(income) AS mean FROM students GROUP BY major"),
    ("students", "SELECT sex, COUNT(*) FROM students GROUP BY sex"),
    ("students", "SELECT SUM(income) FROM students WHERE major = 'EE'"),
    ("students", "SELECT COUNT(*) FROM students WHERE class >= 1980"),
    ("students", "SELECT sex, major, SUM(income) FROM students GROUP BY sex, major"),
    ("hospital", "SELECT town, SUM(income) FROM hospital GROUP BY town"),
    ("hospital", "SELECT town, COUNT(*), AVG(income) FROM hospital GROUP BY town ORDER BY town"),
    ("castro", "SELECT SUM(salary) FROM castro"),
    ("castro", "SELECT municipality, profession, SUM(salary) FROM castro GROUP BY municipality, profession"),
]


def _answer(guard: Guard, sql: str) -> object:
    try:
        result = guard.query(sql, analyst="alice")
    except GuardError as error:
        return (error.kind, error.message)
    return (result.columns, result.rows, result.flags)


@pytest.mark.parametrize(("source", "sql"), QUERIES)
def test_same_answers_as_duckdb(
    pg_policy: Callable[..., Path], tmp_path: Path, source: str, sql: str
) -> None:
    policy = pg_policy(source)
    with Guard.open(policy, state=tmp_path / "duck", backend="duckdb") as duck:
        expected = _answer(duck, sql)
    with Guard.open(policy, state=tmp_path / "pg") as pg:
        assert _answer(pg, sql) == expected


def test_concurrent_queries(pg_policy: Callable[..., Path], tmp_path: Path) -> None:
    threads, rounds = 8, 5
    with Guard.open(pg_policy("castro"), state=tmp_path / "state") as guard:
        backend = guard.backend
        assert isinstance(backend, PostgresBackend)
        query = (
            exp.select("municipality", "SUM(salary)", "COUNT(DISTINCT _uid)")
            .from_("castro")
            .group_by("municipality")
            .order_by("municipality")
        )
        expected = backend.execute(query).rows
        start = threading.Barrier(threads)
        results: list[object] = []

        def work() -> None:
            start.wait()
            for _ in range(rounds):
                try:
                    results.append(backend.execute(query).rows)
                except Exception as error:
                    results.append(error)

        workers = [threading.Thread(target=work) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
        assert results == [expected] * (threads * rounds)
        # one connection per query running at once, kept for the next ones
        assert 1 <= len(backend._idle) <= threads


@pytest.mark.parametrize(
    "sql",
    ["SELECT town, SUM(income) FROM hospital GROUP BY town", "SELECT COUNT(*), AVG(income) FROM hospital"],
)
def test_noise_mode_same_answers_as_duckdb(pg_policy: Callable[..., Path], tmp_path: Path, sql: str) -> None:
    """Noise mode (keyed hash, clamped contributions): the same seeded answers on both engines."""
    policy = pg_policy("hospital-dp")
    answers = []
    for engine in ("duckdb", "postgres"):
        with Guard.open(
            policy, state=tmp_path / engine, backend=engine, rng=InsecureSeededSource(7)
        ) as guard:
            answers.append(_answer(guard, sql))
    assert answers[0] == answers[1]
