"""The guard's own store: an append-only, hash-chained query log in a DuckDB file.

Every request is written and committed here before its answer is returned, so a crash
can lose an answer but never the record of one.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb

from guard.errors import BackendError
from guard.sqlfiles import read_sql, statements
from guard.state.chain import GENESIS, ChainCheck, Head, check_chain, read_head, write_head
from guard.state.commit import GroupCommit, Pending
from guard.state.records import (
    Draw,
    HistoryWrite,
    LedgerEntry,
    LogRecord,
    NoiseWrite,
    Release,
    ReleaseStatus,
    fraction_from_text,
)
from guard.state.secretkey import secret_key
from guard.state.writes import ENCODED_FIELDS, commit_batch, encoded_fields

__all__ = ["GENESIS", "StateStore"]

# the log row's columns: the encoded fields between the row's id and time and its hashes
_LOG_COLUMNS = ("id", "ts", *ENCODED_FIELDS, "elapsed_ms", "prev_hash", "record_hash")

#: the JSON fields of a log row
_JSON = ("columns", "rows", "flags", "notes", "levels")


class StateStore:
    """Opens (creating if needed) ``STATE/guard.duckdb`` and appends to its log."""

    def __init__(self, state_dir: Path, *, read_only: bool = False) -> None:
        """Open the store in ``state_dir``; ``read_only`` opens an existing one without
        writing anything (``guard log --verify`` on a copy), and creates nothing.

        Raises:
            BackendError: the folder or database cannot be opened (the message names the
                file and what to do), its write-ahead log is damaged, or it is in use.
        """
        self.path = state_dir / "guard.duckdb"
        self.head_path = state_dir / "log.head"
        self.read_only = read_only
        wal = self.path.with_name(self.path.name + ".wal")
        pending = not read_only and wal.exists() and wal.stat().st_size > 0
        try:
            if read_only:
                if not self.path.exists():
                    raise BackendError(f"there is no state store at {self.path}: check the --state folder")
                self._con = duckdb.connect(str(self.path), read_only=True)
            else:
                state_dir.mkdir(parents=True, exist_ok=True)
                # one thread: a commit of a few log rows gains nothing from DuckDB's worker
                # threads and pays for waking them (measured: 0.3 ms of CPU a commit of ~2.5)
                self._con = duckdb.connect(str(self.path), config={"threads": 1})
        except OSError as exc:
            raise BackendError(f"cannot create the state folder {state_dir} ({exc.strerror})") from None
        except duckdb.Error as exc:
            raise BackendError(_open_error(self.path, exc)) from None
        self._lock = threading.Lock()
        try:
            if not read_only:
                for statement in statements(read_sql("state.sql")):
                    self._con.execute(statement)
                if pending:
                    # DuckDB replays a sound WAL and drops it at the checkpoint; a damaged
                    # one it skips without a word and leaves in place: never lose records
                    # silently
                    self._con.execute("CHECKPOINT")
                    if wal.exists():
                        raise BackendError(
                            f"the state store's write-ahead log {wal} is damaged and was not replayed: "
                            "the records it held are missing from the store. Keep a copy of it for "
                            "inspection, then move it away to open the store without them"
                        )
            last = self._con.execute(
                "SELECT id, record_hash FROM query_log ORDER BY id DESC LIMIT 1"
            ).fetchone()
            # a store written before a column was added, opened read-only (so not migrated)
            present = {c for (c,) in self._con.execute(_COLUMNS_OF_LOG).fetchall()}
        except duckdb.Error as exc:
            self._con.close()
            raise BackendError(_open_error(self.path, exc)) from None
        except BackendError:
            self._con.close()
            raise
        self._last_hash = last[1] if last else GENESIS
        self._selected = ", ".join(c if c in present else f"NULL AS {c}" for c in _LOG_COLUMNS)
        self._committed: Head | None = None  # the last record committed by this store
        self._published = 0  # the id in the head file, as this store last wrote it
        self._head_lock = threading.Lock()
        self._commits = GroupCommit(self._lock, self._write, self._publish_head)

    def append(
        self,
        record: LogRecord,
        releases: list[Release] | None = None,
        noise: NoiseWrite | None = None,
        history: HistoryWrite | None = None,
    ) -> int:
        """Append one record (and the cells it released, its audited query sets, or its
        noise charge and draws) and commit it; returns its id. Records appended at the
        same time from other threads are committed with it (``commit.py``).

        Raises:
            BackendError: the record could not be written (the answer must then not leave).
        """
        return self.wait(self.queue(record, releases, noise, history))

    def queue(
        self,
        record: LogRecord,
        releases: list[Release] | None = None,
        noise: NoiseWrite | None = None,
        history: HistoryWrite | None = None,
    ) -> Pending:
        """Queue one record for the next commit, its place in the log fixed now (the guard
        queues answers under its release lock: the log lists them in decision order); the
        caller must :meth:`wait` for it before the answer leaves.

        Raises:
            BackendError: the store is open read-only.
        """
        if self.read_only:
            raise BackendError(f"the state store {self.path} is open read-only: nothing can be logged")
        encoded = encoded_fields(record)

        def entry() -> Pending:
            # naive UTC: DuckDB returns TIMESTAMP as it was stored, so the hash re-computes
            ts_text = dt.datetime.now(dt.UTC).replace(tzinfo=None).isoformat()
            return Pending(record, encoded, ts_text, list(releases or ()), noise, history)

        return self._commits.queue(entry)

    def wait(self, entry: Pending) -> int:
        """Return ``entry``'s log id once it is committed (committing it, and every record
        queued with it, if no other thread is already doing so).

        Raises:
            BackendError: the record could not be written (the answer must then not leave).
        """
        return self._commits.settle(entry)

    def _write(self, batch: list[Pending]) -> bool:
        """Commit ``batch`` in one transaction, chained after the last committed record
        (the caller holds the connection's lock); False when nothing was committed."""
        chained = commit_batch(self._con, batch, self._last_hash, self.path)
        if chained is None:
            return False
        self._last_hash = chained[-1][1]
        self._committed = Head(*chained[-1])
        for entry, (log_id, _) in zip(batch, chained, strict=True):
            entry.log_id = log_id
        return True

    def _publish_head(self) -> None:
        """Write the last committed record to the head file, unless a newer one is there, off
        the connection's lock (a rename can take milliseconds): a head that lags behind only
        weakens the tail check, and it is never ahead (it names committed records only)."""
        with self._head_lock:
            head = self._committed
            if head is None or head.id <= self._published:
                return
            with contextlib.suppress(OSError):
                write_head(self.head_path, head)
                self._published = head.id

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """The connection, for a read that sees every record queued before it
        (``GroupCommit.flush``)."""
        self._commits.flush()
        with self._lock:
            yield

    def audit_sets(self, table: str, space: str, scope: str) -> list[tuple[str, bytes, float | None]]:
        """The query sets released into one audit state, on every data version, in
        release order: (data version, finest-cell bitmap, released SUM or None)."""
        with self._reading():
            rows = self._con.execute(
                "SELECT data_version, cells, value FROM audit_sets WHERE table_name = ? "
                "AND space = ? AND scope = ? ORDER BY log_id, position",
                [table, space, scope],
            ).fetchall()
        return [(str(version), bytes(cells), value) for version, cells, value in rows]

    def lineage(self, table: str) -> list[tuple[str, bytes]]:
        """The row identities stored per data version of ``table``, oldest first."""
        with self._reading():
            rows = self._con.execute(
                "SELECT data_version, file FROM audit_lineage WHERE table_name = ? ORDER BY added",
                [table],
            ).fetchall()
        found = []
        for version, name in rows:
            try:
                found.append((str(version), (self.path.parent / name).read_bytes()))
            except OSError as exc:
                raise BackendError(
                    f"cannot read the history audit's row identities {name} in {self.path.parent} "
                    f"({exc.strerror}): restore the file from a backup of the state folder"
                ) from None
        return found

    def add_lineage(self, table: str, data_version: str, identities: bytes) -> None:
        """Store one version's row identities (once; a second call changes nothing): the
        file is written and synced before the row that names it is committed."""
        name = f"lineage/{hashlib.sha256(table.encode()).hexdigest()[:16]}-{data_version[:32]}.npz"
        target = self.path.parent / name
        try:
            target.parent.mkdir(exist_ok=True)
            partial = target.with_suffix(f".{os.getpid()}.partial")
            with partial.open("wb") as handle:
                handle.write(identities)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(partial, target)
            with self._lock:
                self._con.execute(
                    "INSERT INTO audit_lineage VALUES (?, ?, now(), ?) ON CONFLICT DO NOTHING",
                    [table, data_version, name],
                )
        except (OSError, duckdb.Error) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise BackendError(
                f"cannot store the history audit's row identities in {self.path.parent}: {first}; "
                "nothing was answered (check the disk of the state folder)"
            ) from None

    def ledger(self) -> list[LedgerEntry]:
        """Every budget charge, oldest first (the note carries the log id)."""
        with self._reading():
            rows = self._con.execute(
                "SELECT sequence, analyst, epsilon, accounts, ts, note, log_id FROM budget_ledger "
                "ORDER BY sequence"
            ).fetchall()
        entries = []
        for sequence, analyst, epsilon, accounts, ts, note, log_id in rows:
            amounts = tuple(sorted((a, fraction_from_text(v)) for a, v in json.loads(accounts).items()))
            at = ts.replace(tzinfo=dt.UTC).timestamp()
            entries.append(
                LedgerEntry(
                    int(sequence),
                    str(analyst),
                    fraction_from_text(epsilon),
                    at,
                    note or f"log {log_id}",
                    amounts,
                )
            )
        return entries

    def noise_draws(self, data_version: str, table: str) -> dict[str, Draw]:
        """The cached draws of ``table`` at ``data_version``, by cache key."""
        with self._reading():
            rows = self._con.execute(
                "SELECT cache_key, value, scale, epsilon, mechanism FROM noise_draws "
                "WHERE data_version = ? AND table_name = ?",
                [data_version, table],
            ).fetchall()
        return {
            str(key): Draw(float(value), fraction_from_text(scale), fraction_from_text(eps), str(mechanism))
            for key, value, scale, eps, mechanism in rows
        }

    def noise_received(self, data_version: str, table: str) -> dict[str, set[str]]:
        """Per analyst, the cache keys of ``table`` at ``data_version`` they received."""
        with self._reading():
            rows = self._con.execute(
                "SELECT analyst, cache_key FROM noise_received WHERE data_version = ? AND table_name = ?",
                [data_version, table],
            ).fetchall()
        received: dict[str, set[str]] = {}
        for analyst, key in rows:
            received.setdefault(str(analyst), set()).add(str(key))
        return received

    def released(
        self, data_version: str, table: str, analyst: str | None
    ) -> list[tuple[str, str, ReleaseStatus]]:
        """(space, cell key, status) of every cell released on ``table`` at ``data_version``,
        to ``analyst`` only or (None) to anyone; a cell published to anyone in scope
        counts as published, one withheld by the suppression to anyone as withheld by it,
        else as the history audit withheld it last (its control, as memory keeps it)."""
        query = (
            "SELECT space, cell_key, CASE WHEN bool_or(status = 'published') THEN 'published' "
            "WHEN bool_or(status = 'withheld') THEN 'withheld' ELSE arg_max(status, log_id) END "
            "FROM released_cells WHERE data_version = ? AND table_name = ?"
        )
        params: list[Any] = [data_version, table]
        if analyst is not None:
            query += " AND analyst = ?"
            params.append(analyst)
        query += " GROUP BY space, cell_key"
        with self._reading():
            rows = self._con.execute(query, params).fetchall()
        return [(str(a), str(b), ReleaseStatus(c)) for a, b, c in rows]

    def secret(self) -> bytes:
        """The store's secret key (created once, readable by the owner only): seeds what
        must look random to analysts yet repeat for the same table."""
        with self._lock:
            return secret_key(self.path.parent / "secret.key", self.read_only)

    def log(self, analyst: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Log records, oldest first (the last ``limit`` when given)."""
        query = f"SELECT {self._selected} FROM query_log"
        params: list[Any] = []
        if analyst is not None:
            query += " WHERE analyst = ?"
            params.append(analyst)
        query += " ORDER BY id DESC"
        if limit is not None:
            query += f" LIMIT {int(limit)}"
        with self._reading():
            rows = self._con.execute(query, params).fetchall()
        records = []
        for row in reversed(rows):
            record = dict(zip(_LOG_COLUMNS, row, strict=True))
            for key in _JSON:
                if record[key] is not None:
                    record[key] = json.loads(record[key])
            records.append(record)
        return records

    def verify(self) -> tuple[int, int | None]:
        """Check the hash chain and the log's tail against its head; returns (records
        checked, id of the first broken or missing record, or None)."""
        check = self.check_chain()
        return check.checked, check.broken

    def check_chain(self) -> ChainCheck:
        """The hash chain checked record by record, and against the head file.

        Raises:
            BackendError: the head file is damaged.
        """
        with self._reading():
            rows = self._con.execute(f"SELECT {self._selected} FROM query_log ORDER BY id").fetchall()
        records = (dict(zip(_LOG_COLUMNS, row, strict=True)) for row in rows)
        encoded_rows = (
            (
                int(r["id"]),
                r["ts"].isoformat(),
                {k: r[k] for k in ENCODED_FIELDS},
                r["prev_hash"],
                r["record_hash"],
            )
            for r in records
        )
        return check_chain(encoded_rows, read_head(self.head_path))

    def close(self) -> None:
        with self._reading():
            self._con.close()


_COLUMNS_OF_LOG = "SELECT column_name FROM information_schema.columns WHERE table_name = 'query_log'"


def _open_error(path: Path, exc: duckdb.Error) -> str:
    text = str(exc)
    if "lock" in text.lower():
        return (
            f"the state store {path} is in use by another guard process: stop it, "
            "or give this one its own folder with --state DIR"
        )
    first = text.splitlines()[0] if text else type(exc).__name__
    return (
        f"cannot open the state store {path}: {first}. If the file is damaged, restore the state "
        "folder from a backup (or start a new one with --state DIR)"
    )
