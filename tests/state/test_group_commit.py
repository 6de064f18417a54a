"""Group commit: records queued while a commit is under way are committed together, in
queue order and chained; a record the store refuses fails alone; many threads asking at
once get the decisions serial asks get, each logged once; and an answer that was
returned is on disk when the process is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guard import Guard, GuardError
from guard.errors import BackendError
from guard.state.records import LogRecord, Outcome, Release, ReleaseStatus
from guard.state.store import StateStore

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "policies" / "students.yaml"
MIX = [
    "SELECT major, SUM(income) FROM students GROUP BY major",
    "SELECT COUNT(*) FROM students",
    "SELECT sex, major, COUNT(*), AVG(income) FROM students GROUP BY sex, major",
    "SELECT class, SUM(income) FROM students WHERE major = 'CS' GROUP BY class",
    "SELECT SUM(income) FROM students WHERE sex = 'Female' AND major = 'EE'",
    "SELECT name FROM students",
]


def _record(n: int) -> LogRecord:
    return LogRecord(analyst="alice", sql=f"SELECT {n}", decision=Outcome.REJECTED)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    store = StateStore(tmp_path)
    yield store
    store.close()


def _queued_while_the_connection_is_busy(store: StateStore, count: int, bad: int | None = None) -> list[Any]:
    """``count`` threads append while the test holds the store's connection; returns
    what each got (a log id or the error), in request order."""
    outcomes: list[Any] = [None] * count
    # a release with no cell key breaks the table's NOT NULL: the store refuses that record
    broken = [Release("students", "count", None, ReleaseStatus.PUBLISHED)]  # type: ignore[arg-type]

    def ask(n: int) -> None:
        try:
            outcomes[n] = store.append(_record(n), broken if n == bad else None)
        except BackendError as error:
            outcomes[n] = error

    threads = []
    with store._lock:  # a commit under way
        for n in range(count):
            threads.append(threading.Thread(target=ask, args=(n,)))
            threads[-1].start()
            while len(store._commits._queue) < n + 1:  # queued in this order
                time.sleep(0.001)
    for thread in threads:
        thread.join()
    return outcomes


def test_records_queued_during_a_commit_are_committed_together_in_order(
    store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches: list[int] = []
    write = store._commits._write
    monkeypatch.setattr(store._commits, "_write", lambda batch: batches.append(len(batch)) or write(batch))
    ids = _queued_while_the_connection_is_busy(store, 12)
    assert batches == [12]  # one transaction, one sync
    assert ids == sorted(ids) and len(set(ids)) == 12
    assert [r["sql"] for r in store.log()] == [f"SELECT {n}" for n in range(12)]
    assert store.verify() == (12, None)
    assert store.check_chain().head is not None and store.check_chain().head.id == ids[-1]  # type: ignore[union-attr]


def test_a_record_the_store_refuses_fails_alone(store: StateStore) -> None:
    outcomes = _queued_while_the_connection_is_busy(store, 6, bad=3)
    assert isinstance(outcomes[3], BackendError) and "cannot write the query log" in outcomes[3].message
    assert all(isinstance(o, int) for n, o in enumerate(outcomes) if n != 3)
    assert [r["sql"] for r in store.log()] == [f"SELECT {n}" for n in range(6) if n != 3]
    assert store.verify() == (5, None)  # chained past the one that failed
    assert store.append(_record(9)) > 0 and store.verify() == (6, None)


def _outcome(guard: Guard, sql: str) -> tuple[str, Any]:
    try:
        result = guard.query(sql, analyst="alice")
    except GuardError as error:
        return error.kind, error.message
    return "answered", (result.rows, result.flags)


def test_many_threads_get_the_decisions_of_serial_asks_in_log_order_each_logged_once(tmp_path: Path) -> None:
    """Decisions depend on what was released before, so the serial asks follow the log:
    an answer is logged in the order it was decided, and replaying the log one request
    at a time on a fresh store gives every client exactly what it got."""
    asks = [f"{MIX[n % len(MIX)]} /* request {n} */" for n in range(48)]
    got: dict[str, tuple[str, Any]] = {}
    with Guard.open(POLICY, state=tmp_path / "threads") as guard:
        guard.prepare()
        start = threading.Barrier(16)

        def client(k: int) -> None:
            start.wait()
            for n in range(k, len(asks), 16):
                got[asks[n]] = _outcome(guard, asks[n])

        threads = [threading.Thread(target=client, args=(k,)) for k in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        log = guard.log()
        assert guard.store.verify() == (len(asks), None)
    assert sorted(r["sql"] for r in log) == sorted(asks)  # each request once
    decision = {"answered": "answered", "QueryRefused": "refused", "QueryRejected": "rejected"}
    with Guard.open(POLICY, state=tmp_path / "serial") as guard:
        for record in log:
            serial = _outcome(guard, record["sql"])
            assert got[record["sql"]] == serial
            assert record["decision"] == decision[serial[0]]
            if serial[0] == "answered":
                assert (record["rows"], record["flags"]) == serial[1]


#: answers from 8 threads; each prints its request number once its answer is returned
_CLIENTS = """
import sys, threading
from guard import Guard, GuardError
guard = Guard.open(sys.argv[1], state=sys.argv[2])
guard.prepare()
mix = {mix!r}
lock = threading.Lock()
def client(k):
    for n in range(k, 100000, 8):
        try:
            guard.query(f"{{mix[n % len(mix)]}} /* request {{n}} */", analyst="alice")
        except GuardError:
            continue
        with lock:
            print(n, flush=True)
for k in range(8):
    threading.Thread(target=client, args=(k,)).start()
"""


def test_an_answer_returned_before_a_kill_is_in_the_log(tmp_path: Path) -> None:
    script = _CLIENTS.format(mix=MIX[:4])  # answered shapes only
    process = subprocess.Popen(
        [sys.executable, "-c", script, str(POLICY), str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    returned = []
    try:
        while len(returned) < 60:
            line = process.stdout.readline()
            assert line, "the clients stopped before answering"
            returned.append(int(line))
    finally:
        process.send_signal(signal.SIGKILL)  # mid-batch, without a checkpoint
        process.wait()
    store = StateStore(tmp_path)
    try:
        logged = {r["sql"] for r in store.log() if r["decision"] == "answered"}
        check = store.check_chain()
    finally:
        store.close()
    assert {n for n in returned if f"{MIX[n % 4]} /* request {n} */" not in logged} == set()
    assert check.broken is None


def test_a_read_of_the_store_sees_every_record_queued_before_it(store: StateStore) -> None:
    """Memory rebuilt from the store (earlier releases, audit states) must not miss a
    decision whose record is still on its way to the disk."""
    cell = Release("students", "count", '["x"]', ReleaseStatus.PUBLISHED)
    record = LogRecord(analyst="alice", sql="SELECT 1", decision=Outcome.ANSWERED, data_version="v1")
    pending = store.queue(record, [cell])
    assert store.released("v1", "students", None) == [("count", '["x"]', ReleaseStatus.PUBLISHED)]
    assert pending.settled and store.wait(pending) == 1
