"""Group commit: the log records of concurrent requests made durable by one commit.

Committing a DuckDB transaction writes and syncs the write-ahead log, most of what a
small answer's log append costs. With one commit per record, every request waits for
every earlier request's sync in turn. Here a record is first *queued* (:class:`Pending`,
cheap, in the caller's order), then *settled*: the first waiter that gets the store's
connection writes every queued record in one transaction, in queue order, and commits
once; the others find theirs committed when they get the connection. Each caller still
returns only once its own record is committed, so nothing answered is lost from the log.

The hash chain is computed by the writer, from the last committed record, never at
queue time: a failed transaction leaves no queued record chained to one that is not in
the log. When a batch's transaction fails, each of its records is retried alone, so one
record the store cannot take fails only its own request, as without group commit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from guard.errors import BackendError
from guard.state.records import HistoryWrite, LogRecord, NoiseWrite, Release

__all__ = ["GroupCommit", "Pending"]


@dataclass(eq=False)
class Pending:
    """One queued record and what its answer adds beside it; settled by the writer."""

    record: LogRecord
    #: the record's fields as the log row stores and the hash covers them
    encoded: dict[str, Any]
    #: its time (UTC, naive ISO text), taken when it was queued: log order is queue order
    ts_text: str
    releases: list[Release] = field(default_factory=list)
    noise: NoiseWrite | None = None
    history: HistoryWrite | None = None
    #: set once settled: the log id, or the error that kept it out of the log
    log_id: int | None = None
    error: BaseException | None = None
    settled: bool = False


#: commits ``batch`` in one transaction and returns True, or leaves the store as it was
#: and returns False; a batch of one records its error on its entry instead
Writer = Callable[[list[Pending]], bool]


class GroupCommit:
    """The queue of records waiting for a commit, and the one writer at a time.

    ``connection`` is the lock of the store's connection (readers take it too); the
    writer holds it for the whole batch.
    """

    def __init__(self, connection: threading.Lock, write: Writer, after: Callable[[], None]) -> None:
        """``after()`` runs once a writer has released the connection (the store
        publishes its log head there, off the path of the next commit)."""
        self._connection = connection
        self._write = write
        self._after = after
        self._queue_lock = threading.Lock()
        self._queue: list[Pending] = []

    def queue(self, make: Callable[[], Pending]) -> Pending:
        """Queue the entry ``make()`` builds (called under the queue's lock, so the time
        it takes and its place in the log agree)."""
        with self._queue_lock:
            entry = make()
            self._queue.append(entry)
        return entry

    def settle(self, entry: Pending) -> int:
        """Wait until ``entry`` is committed (writing every queued record if no one else
        is) and return its log id.

        Raises:
            BackendError: its record could not be committed (as the writer reported it).
        """
        wrote = False
        with self._connection:
            # an entry leaves the queue only under this lock, settled before it is released:
            # unsettled here means it is still queued, and this caller writes it
            if not entry.settled:
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                self._commit(batch)
                wrote = True
        if wrote:
            self._after()
        if entry.error is not None:
            raise entry.error
        assert entry.log_id is not None
        return entry.log_id

    def flush(self) -> None:
        """Commit every record queued so far. Readers of the store call it first: memory
        rebuilt from the store (earlier releases, audit states) must not miss a decision
        whose record is still on its way, and the guard queues every answer under the
        lock it decides under, so none can be queued while such a read runs."""
        with self._connection:
            with self._queue_lock:
                batch, self._queue = self._queue, []
            if batch:
                self._commit(batch)
        if batch:
            self._after()

    def _commit(self, batch: list[Pending]) -> None:
        try:
            if len(batch) == 1 or not self._write(batch):
                for entry in batch:
                    self._write([entry])
        finally:
            for entry in batch:
                if entry.log_id is None and entry.error is None:  # the writer itself failed
                    entry.error = BackendError(
                        "the query log's writer failed before this request's record was committed: "
                        "nothing was answered or charged"
                    )
                entry.settled = True
