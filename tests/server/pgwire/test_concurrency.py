"""Many clients at once: queries run on the worker pool, the event loop never waits."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest

from guard import Guard
from guard.server.limits import ServeLimits
from guard.server.pgwire import running_pg_server

POLICIES = Path(__file__).resolve().parents[3] / "policies"


def test_many_clients_at_once(serve: Callable[..., Any]) -> None:
    # 24 sessions of one analyst: more than the default per-analyst limit allows
    students = serve("students", limits=ServeLimits(max_connections_per_analyst=24))

    def client(n: int) -> list[tuple[Any, ...]]:
        with psycopg.connect(students.dsn(), autocommit=True) as conn:
            return [
                conn.execute("SELECT major, COUNT(*) FROM students GROUP BY major").fetchall()
                for _ in range(5)
            ]

    with ThreadPoolExecutor(24) as pool:
        answers = list(pool.map(client, range(24)))
    assert all(answer == [[("CS", 5), ("EE", 4)]] * 5 for answer in answers)


def test_the_event_loop_answers_while_every_worker_is_busy(gated: Any) -> None:
    with (
        psycopg.connect(gated.dsn(), autocommit=True) as busy,
        psycopg.connect(gated.dsn(), autocommit=True) as other,
    ):
        thread = threading.Thread(target=lambda: busy.execute("SELECT COUNT(*) FROM students"))
        thread.start()
        assert gated.guard.entered.wait(5)
        # start-up, authentication and session commands need no worker
        with psycopg.connect(gated.dsn(), autocommit=True) as late:
            assert late.execute("SHOW server_version").fetchone() == ("16.0 (statguard)",)
        assert other.execute("SHOW TimeZone").fetchone() == ("UTC",)
        gated.guard.opened.set()
        thread.join(10)


def test_closing_the_server_ends_its_sessions(tmp_path: Any) -> None:
    with Guard.open(POLICIES / "students.yaml", state=tmp_path) as guard:
        with running_pg_server(guard, port=0) as server:
            conn = psycopg.connect(
                f"host=127.0.0.1 port={server.port} user=alice password=alice-demo dbname=statguard",
                autocommit=True,
            )
            assert conn.execute("SELECT COUNT(*) FROM students").fetchone() == (9,)
        with pytest.raises(
            psycopg.OperationalError, match="terminating connection due to administrator command"
        ):
            conn.execute("SELECT COUNT(*) FROM students")
        conn.close()


class _Barrier:
    """A guard whose queries wait until ``parties`` of them are inside it at once (as
    requests wait together for the commit of their log records)."""

    def __init__(self, guard: Any, parties: int) -> None:
        self._guard = guard
        self.barrier = threading.Barrier(parties, timeout=10)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._guard, name)

    def query(self, *args: Any, **kwargs: Any) -> Any:
        self.barrier.wait()  # broken (BrokenBarrierError: an internal error) if too few get in
        return self._guard.query(*args, **kwargs)


def test_sixteen_clients_wait_for_their_commits_at_once(serve: Callable[..., Any]) -> None:
    """The default pool holds a thread per request until its record is committed: with
    fewer threads than clients, the rest waited outside and each commit carried fewer
    records (the endpoint stalled at ~380 queries/s with 8 threads and 16 clients)."""
    clients = 16
    students = serve(
        "students",
        wrap=lambda guard: _Barrier(guard, clients),
        limits=ServeLimits(max_connections_per_analyst=clients),
    )

    def client(_: int) -> Any:
        with psycopg.connect(students.dsn(), autocommit=True) as conn:
            return conn.execute("SELECT COUNT(*) FROM students").fetchone()

    with ThreadPoolExecutor(clients) as pool:
        assert list(pool.map(client, range(clients))) == [(9,)] * clients
