"""CancelRequest: a running query's answer is discarded, a queued one never runs; either
way its client gets 57014 and the connection stays usable."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg

COUNT = "SELECT COUNT(*) FROM students"


def _in_thread(conn: psycopg.Connection[Any], sql: str) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["rows"] = conn.execute(sql).fetchall()
        except psycopg.Error as error:
            outcome["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_cancel_discards_a_running_querys_answer(gated: Any) -> None:
    with psycopg.connect(gated.dsn(), autocommit=True) as conn:
        thread, outcome = _in_thread(conn, COUNT)
        assert gated.guard.entered.wait(5)
        conn.cancel_safe()
        gated.guard.opened.set()
        thread.join(10)
        assert outcome["error"].sqlstate == "57014"
        assert gated.log_size() == 1  # it ran and was logged; only the answer was dropped
        assert conn.execute(COUNT).fetchone() == (9,)


def test_cancel_of_a_queued_query_answers_at_once_and_never_runs(gated: Any) -> None:
    with (
        psycopg.connect(gated.dsn(), autocommit=True) as first,
        psycopg.connect(gated.dsn(), autocommit=True) as second,
    ):
        running, first_outcome = _in_thread(first, COUNT)
        assert gated.guard.entered.wait(5)
        queued, second_outcome = _in_thread(second, "SELECT COUNT(*) FROM students WHERE sex = 'Male'")
        time.sleep(0.3)  # the second query waits for the only worker
        second.cancel_safe()
        queued.join(5)
        assert not queued.is_alive(), "the cancelled query should not wait for the worker"
        assert second_outcome["error"].sqlstate == "57014"
        gated.guard.opened.set()
        running.join(10)
        assert first_outcome["rows"] == [(9,)]
        assert [entry["sql"] for entry in gated.guard.log()] == [COUNT]
