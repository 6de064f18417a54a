"""The guard's own store: an append-only, hash-chained query log in a DuckDB file.

Every request is written and committed here before its answer is returned, so a crash
can lose an answer but never the record of one.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from guard.errors import BackendError
from guard.noise.budget import LedgerEntry
from guard.noise.cache import Draw, fraction_from_text, fraction_text
from guard.sqlfiles import read_sql, statements

__all__ = ["GENESIS", "AuditedSet", "HistoryWrite", "LogRecord", "NoiseWrite", "Release", "StateStore"]

GENESIS = "0" * 64
_LOG_COLUMNS = (
    "id",
    "ts",
    "analyst",
    "sql",
    "canonical",
    "data_version",
    "decision",
    "error",
    "reason",
    "columns",
    "rows",
    "flags",
    "notes",
    "elapsed_ms",
    "prev_hash",
    "record_hash",
)


#: up to this many rows, an insert goes row by row instead of through a registered frame
_ROW_BY_ROW = 16


@dataclass(frozen=True)
class LogRecord:
    """One request as it is logged. ``rows`` holds only released values."""

    analyst: str
    sql: str
    decision: str
    canonical: str | None = None
    data_version: str | None = None
    error: str | None = None
    reason: str | None = None
    columns: list[str] | None = None
    rows: list[list[Any]] | None = None
    flags: list[list[str]] | None = None
    notes: list[str] | None = None
    elapsed_ms: float | None = None


@dataclass(frozen=True)
class Release:
    """One cell key of an answer and whether it was published or withheld."""

    table: str
    space: str
    cell_key: str
    status: str


@dataclass(frozen=True)
class AuditedSet:
    """One released query set as the state store keeps it."""

    space: str
    scope: str
    label: str
    #: the finest-cell ids, a serialized roaring bitmap
    cells: bytes
    #: the released value (read only by the partial-disclosure LP)
    value: float | None


@dataclass(frozen=True)
class HistoryWrite:
    """What an answer adds to the audit history, in the transaction of its log row."""

    data_version: str
    table: str
    sets: tuple[AuditedSet, ...]


@dataclass(frozen=True)
class NoiseWrite:
    """What a noisy answer adds to the store, in the transaction of its log row."""

    data_version: str
    table: str
    #: the budget charge (None when the answer repeats what the analyst received)
    charge: LedgerEntry | None
    #: new draws, by cache key
    draws: dict[str, Draw]
    #: cache keys the analyst receives for the first time
    received: list[str]


def _record_hash(prev_hash: str, ts: str, record: dict[str, Any]) -> str:
    body = json.dumps({"ts": ts, **record}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256((prev_hash + body).encode()).hexdigest()


class StateStore:
    """Opens (creating if needed) ``STATE/guard.duckdb`` and appends to its log."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "guard.duckdb"
        try:
            state_dir.mkdir(parents=True, exist_ok=True)
            self._con = duckdb.connect(str(self.path))
        except OSError as exc:
            raise BackendError(f"cannot create the state folder {state_dir} ({exc.strerror})") from None
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                raise BackendError(
                    f"the state store {self.path} is in use by another guard process: stop it, "
                    "or give this one its own folder with --state DIR"
                ) from None
            raise BackendError(f"cannot open the state store {self.path}: {exc}") from None
        self._lock = threading.Lock()
        for statement in statements(read_sql("state.sql")):
            self._con.execute(statement)
        last = self._con.execute("SELECT record_hash FROM query_log ORDER BY id DESC LIMIT 1").fetchone()
        self._last_hash = last[0] if last else GENESIS

    def append(
        self,
        record: LogRecord,
        releases: list[Release] | None = None,
        noise: NoiseWrite | None = None,
        history: HistoryWrite | None = None,
    ) -> int:
        """Append one record (and the cells it released, its audited query sets, or its
        noise charge and draws) and commit it; returns its id.

        Raises:
            BackendError: the record could not be written (the answer must then not leave).
        """
        fields = {
            "analyst": record.analyst,
            "sql": record.sql,
            "canonical": record.canonical,
            "data_version": record.data_version,
            "decision": record.decision,
            "error": record.error,
            "reason": record.reason,
            "columns": record.columns,
            "rows": record.rows,
            "flags": record.flags,
            "notes": record.notes,
        }
        encoded = {k: json.dumps(v, default=str) if isinstance(v, list) else v for k, v in fields.items()}
        with self._lock:
            # naive UTC: DuckDB returns TIMESTAMP as it was stored, so the hash re-computes
            ts_text = dt.datetime.now(dt.UTC).replace(tzinfo=None).isoformat()
            record_hash = _record_hash(self._last_hash, ts_text, encoded)
            try:
                self._con.execute("BEGIN")
                row = self._con.execute(
                    "INSERT INTO query_log (ts, analyst, sql, canonical, data_version, decision, "
                    "error, reason, columns, rows, flags, notes, elapsed_ms, prev_hash, record_hash) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    [
                        ts_text,
                        encoded["analyst"],
                        encoded["sql"],
                        encoded["canonical"],
                        encoded["data_version"],
                        encoded["decision"],
                        encoded["error"],
                        encoded["reason"],
                        encoded["columns"],
                        encoded["rows"],
                        encoded["flags"],
                        encoded["notes"],
                        record.elapsed_ms,
                        self._last_hash,
                        record_hash,
                    ],
                ).fetchone()
                assert row is not None
                if releases:
                    self._insert_releases(record, releases, int(row[0]))
                if noise is not None:
                    self._insert_noise(record, noise, int(row[0]), ts_text)
                if history is not None:
                    self._insert_history(history, int(row[0]))
                self._con.execute("COMMIT")
            except duckdb.Error as exc:
                self._con.execute("ROLLBACK")
                raise BackendError(f"cannot write the query log: {str(exc).splitlines()[0]}") from None
            self._last_hash = record_hash
            return int(row[0])

    def _insert_releases(self, record: LogRecord, releases: list[Release], log_id: int) -> None:
        # one bulk insert from a data frame: executemany inserts row by row (seconds for
        # a few thousand cells)
        frame = pd.DataFrame(
            {
                "data_version": [record.data_version] * len(releases),
                "table_name": [c.table for c in releases],
                "space": [c.space for c in releases],
                "cell_key": [c.cell_key for c in releases],
                "analyst": [record.analyst] * len(releases),
                "status": [c.status for c in releases],
                "log_id": [log_id] * len(releases),
            }
        )
        self._insert_frame("released_cells", frame)

    def _insert_noise(self, record: LogRecord, noise: NoiseWrite, log_id: int, ts: str) -> None:
        if noise.charge is not None:
            entry = noise.charge
            accounts = {account: fraction_text(amount) for account, amount in entry.accounts}
            self._con.execute(
                "INSERT INTO budget_ledger VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    entry.sequence,
                    ts,
                    entry.analyst,
                    fraction_text(entry.epsilon),
                    json.dumps(accounts),
                    entry.note,
                    log_id,
                ],
            )
        if noise.draws:
            keys = list(noise.draws)
            draws = [noise.draws[k] for k in keys]
            frame = pd.DataFrame(
                {
                    "data_version": [noise.data_version] * len(keys),
                    "table_name": [noise.table] * len(keys),
                    "cache_key": keys,
                    "value": [d.value for d in draws],
                    "scale": [fraction_text(d.scale) for d in draws],
                    "epsilon": [fraction_text(d.epsilon) for d in draws],
                    "mechanism": [d.mechanism for d in draws],
                    "log_id": [log_id] * len(keys),
                }
            )
            self._insert_frame("noise_draws", frame)
        if noise.received:
            frame = pd.DataFrame(
                {
                    "data_version": [noise.data_version] * len(noise.received),
                    "table_name": [noise.table] * len(noise.received),
                    "cache_key": noise.received,
                    "analyst": [record.analyst] * len(noise.received),
                    "log_id": [log_id] * len(noise.received),
                }
            )
            self._insert_frame("noise_received", frame)

    def _insert_history(self, history: HistoryWrite, log_id: int) -> None:
        rows = [
            [history.data_version, history.table, s.space, s.scope, log_id, i, s.label, s.cells, s.value]
            for i, s in enumerate(history.sets)
        ]
        # blobs go row by row: a frame would carry them as Python objects anyway
        self._con.executemany("INSERT INTO audit_sets VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def audit_sets(
        self, data_version: str, table: str, space: str, scope: str
    ) -> list[tuple[bytes, float | None]]:
        """The query sets released into one audit state, in release order."""
        with self._lock:
            rows = self._con.execute(
                "SELECT cells, value FROM audit_sets WHERE data_version = ? AND table_name = ? "
                "AND space = ? AND scope = ? ORDER BY log_id, position",
                [data_version, table, space, scope],
            ).fetchall()
        return [(bytes(cells), value) for cells, value in rows]

    def _insert_frame(self, table: str, frame: pd.DataFrame) -> None:
        if len(frame) <= _ROW_BY_ROW:
            # registering a frame costs ~1 ms whatever its size: few rows go one by one
            marks = ", ".join("?" * len(frame.columns))
            rows = [list(row) for row in frame.itertuples(index=False, name=None)]
            self._con.executemany(f"INSERT OR IGNORE INTO {table} VALUES ({marks})", rows)
            return
        self._con.register("_frame", frame)
        try:
            self._con.execute(f"INSERT OR IGNORE INTO {table} SELECT * FROM _frame")
        finally:
            self._con.unregister("_frame")

    def ledger(self) -> list[LedgerEntry]:
        """Every budget charge, oldest first (the note carries the log id)."""
        with self._lock:
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
        with self._lock:
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
        with self._lock:
            rows = self._con.execute(
                "SELECT analyst, cache_key FROM noise_received WHERE data_version = ? AND table_name = ?",
                [data_version, table],
            ).fetchall()
        received: dict[str, set[str]] = {}
        for analyst, key in rows:
            received.setdefault(str(analyst), set()).add(str(key))
        return received

    def released(self, data_version: str, table: str, analyst: str | None) -> list[tuple[str, str, str]]:
        """(space, cell key, status) of every cell released on ``table`` at ``data_version``,
        to ``analyst`` only or (None) to anyone; a cell published to anyone in scope
        counts as published."""
        query = (
            "SELECT space, cell_key, CASE WHEN bool_or(status = 'published') THEN 'published' "
            "ELSE 'withheld' END FROM released_cells WHERE data_version = ? AND table_name = ?"
        )
        params: list[Any] = [data_version, table]
        if analyst is not None:
            query += " AND analyst = ?"
            params.append(analyst)
        query += " GROUP BY space, cell_key"
        with self._lock:
            return [(str(a), str(b), str(c)) for a, b, c in self._con.execute(query, params).fetchall()]

    def secret(self) -> bytes:
        """The store's secret key (created once, readable by the owner only): seeds what
        must look random to analysts yet repeat for the same table."""
        path = self.path.parent / "secret.key"
        with self._lock:
            try:
                return path.read_bytes()
            except FileNotFoundError:
                pass
            key = secrets.token_bytes(32)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(key)
            return key

    def log(self, analyst: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Log records, oldest first (the last ``limit`` when given)."""
        query = f"SELECT {', '.join(_LOG_COLUMNS)} FROM query_log"
        params: list[Any] = []
        if analyst is not None:
            query += " WHERE analyst = ?"
            params.append(analyst)
        query += " ORDER BY id DESC"
        if limit is not None:
            query += f" LIMIT {int(limit)}"
        with self._lock:
            rows = self._con.execute(query, params).fetchall()
        records = []
        for row in reversed(rows):
            record = dict(zip(_LOG_COLUMNS, row, strict=True))
            for key in ("columns", "rows", "flags", "notes"):
                if record[key] is not None:
                    record[key] = json.loads(record[key])
            records.append(record)
        return records

    def verify(self) -> tuple[int, int | None]:
        """Check the hash chain; returns (records checked, id of the first broken one or None)."""
        with self._lock:
            rows = self._con.execute(
                "SELECT id, ts, analyst, sql, canonical, data_version, decision, error, reason, "
                "columns, rows, flags, notes, prev_hash, record_hash FROM query_log ORDER BY id"
            ).fetchall()
        previous = GENESIS
        for row in rows:
            (
                id_,
                ts,
                analyst,
                sql,
                canonical,
                version,
                decision,
                error,
                reason,
                columns,
                values,
                flags,
                notes,
                prev_hash,
                record_hash,
            ) = row
            encoded = {
                "analyst": analyst,
                "sql": sql,
                "canonical": canonical,
                "data_version": version,
                "decision": decision,
                "error": error,
                "reason": reason,
                "columns": columns,
                "rows": values,
                "flags": flags,
                "notes": notes,
            }
            ts_text = ts.isoformat()
            if prev_hash != previous or _record_hash(prev_hash, ts_text, encoded) != record_hash:
                return len(rows), int(id_)
            previous = record_hash
        return len(rows), None

    def close(self) -> None:
        with self._lock:
            self._con.close()
