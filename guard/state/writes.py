"""The rows of a batch of log records, inside its one transaction: the log rows, and what
each answer adds beside its row (the released-cell links, the noise ledger charge, draws
and received keys, and the history audit's query sets).

DuckDB's cost is per statement (~1 ms each, and ``executemany`` is one statement per
row), not per row, so a batch writes each table with one statement whatever its size.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from guard.errors import BackendError
from guard.state.chain import record_hash
from guard.state.commit import Pending
from guard.state.records import LogRecord, NoiseWrite, fraction_text

__all__ = ["ENCODED_FIELDS", "commit_batch", "encoded_fields", "insert_batch", "insert_frame", "insert_rows"]

#: up to this many rows, an insert is one statement of literal rows; more go through a
#: registered frame (which costs ~1 ms whatever its size)
VALUES_ROWS = 64

#: the encoded fields in the order of the log row's columns
ENCODED_FIELDS = (
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
    "levels",
)


def encoded_fields(record: LogRecord) -> dict[str, Any]:
    """The fields of ``record`` as the log row stores them and its hash covers them
    (lists as JSON text)."""
    fields = {
        "analyst": record.analyst,
        "sql": record.sql,
        "canonical": record.canonical,
        "data_version": record.data_version,
        "decision": record.decision.value,
        "error": record.error,
        "reason": record.reason,
        "columns": record.columns,
        "rows": record.rows,
        "flags": record.flags,
        "notes": record.notes,
        "levels": record.levels,
    }
    return {k: json.dumps(v, default=str) if isinstance(v, list | dict) else v for k, v in fields.items()}


def commit_batch(
    con: duckdb.DuckDBPyConnection, batch: Sequence[Pending], previous: str, path: Path
) -> list[tuple[int, str]] | None:
    """Insert ``batch`` (:func:`insert_batch`) and commit it; returns each record's (log id,
    hash), or None when nothing was committed (a batch of one then holds its error;
    ``path``, the store's file, is named in it).

    A batch of log rows alone (no released cells, audit sets or noise) is one INSERT,
    committed as its own transaction: no BEGIN and COMMIT around it (each DuckDB call
    costs CPU, and releases the GIL, which a busy server hands back only after its switch
    interval, while the store's connection waits)."""
    rows, hashes = _log_rows(batch, previous)
    chained: list[tuple[int, str]] = []
    alone = all(_log_only(entry) for entry in batch)
    try:
        if alone:
            chained = _insert_log(con, rows, hashes)
        else:
            try:
                chained = _transaction(con, batch, rows, hashes, ignore=False)
            except duckdb.ConstraintException:
                # a released cell the store has already (what the linker remembers as written
                # is empty after a restart): the batch again, each key keeping its first status
                con.execute("ROLLBACK")
                chained = _transaction(con, batch, rows, hashes, ignore=True)
    except Exception as exc:  # any fault goes to the waiting requests, not to this writer alone
        # a failed COMMIT (disk full) has already ended the transaction: then
        # ROLLBACK fails too, and that must not hide the error that matters
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        if _is_last(con, hashes[-1]):
            # the commit reported a failure yet the records are there: retrying would log
            # them twice, and chaining the next one to an older hash would break the chain
            return chained or _ids_of(con, hashes)
        if len(batch) == 1:
            batch[0].error = _write_error(exc, path)
        return None
    return chained


def _transaction(
    con: duckdb.DuckDBPyConnection,
    batch: Sequence[Pending],
    rows: list[list[Any]],
    hashes: list[str],
    ignore: bool,
) -> list[tuple[int, str]]:
    """The log ``rows`` of ``batch`` and what its answers add, in one transaction;
    ``ignore``: a released cell already stored is skipped, else it raises
    ``duckdb.ConstraintException`` (a plain INSERT costs a quarter of an INSERT OR IGNORE:
    measured 0.6 against 2.4 ms of CPU for one row of ``released_cells``)."""
    con.execute("BEGIN")
    chained = _insert_log(con, rows, hashes)
    _insert_beside(con, batch, [log_id for log_id, _ in chained], ignore)
    con.execute("COMMIT")
    return chained


def _log_only(entry: Pending) -> bool:
    """Whether ``entry`` adds nothing beside its log row."""
    return not entry.releases and entry.noise is None and (entry.history is None or not entry.history.sets)


def _is_last(con: duckdb.DuckDBPyConnection, hash_: str) -> bool:
    """Whether the log's last committed record has ``hash_``."""
    try:
        row = con.execute("SELECT record_hash FROM query_log ORDER BY id DESC LIMIT 1").fetchone()
    except duckdb.Error:
        return False
    return row is not None and row[0] == hash_


def _ids_of(con: duckdb.DuckDBPyConnection, hashes: list[str]) -> list[tuple[int, str]]:
    """(log id, hash) of the committed records with ``hashes``, in their order."""
    marks = ", ".join("?" * len(hashes))
    found = con.execute(f"SELECT record_hash, id FROM query_log WHERE record_hash IN ({marks})", hashes)
    ids = {str(hash_): int(log_id) for hash_, log_id in found.fetchall()}
    return [(ids[hash_], hash_) for hash_ in hashes]


def _write_error(exc: Exception, path: Path) -> BaseException:
    if not isinstance(exc, duckdb.Error):
        return exc  # not the store's: the guard reports it as an internal error
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return BackendError(
        f"cannot write the query log in {path}: {first}; nothing was answered or "
        "charged (check the disk of the state folder)"
    )


def insert_batch(
    con: duckdb.DuckDBPyConnection, batch: Sequence[Pending], previous: str
) -> list[tuple[int, str]]:
    """Insert ``batch``'s log rows, chained in order after the record whose hash is
    ``previous``, and what their answers add, in the caller's transaction; returns each
    record's (log id, hash)."""
    chained = _insert_log(con, *_log_rows(batch, previous))
    _insert_beside(con, batch, [log_id for log_id, _ in chained], ignore=True)
    return chained


def _log_rows(batch: Sequence[Pending], previous: str) -> tuple[list[list[Any]], list[str]]:
    """The log rows of ``batch``, chained in order after the hash ``previous``, and
    their hashes."""
    hashes = []
    rows: list[list[Any]] = []
    for entry in batch:
        hash_ = record_hash(previous, entry.ts_text, entry.encoded)
        encoded = entry.encoded
        rows.append(
            [entry.ts_text, *(encoded[k] for k in ENCODED_FIELDS), entry.record.elapsed_ms, previous, hash_]
        )
        hashes.append(hash_)
        previous = hash_
    return rows, hashes


def _insert_log(
    con: duckdb.DuckDBPyConnection, rows: list[list[Any]], hashes: list[str]
) -> list[tuple[int, str]]:
    """Insert the log ``rows`` (one statement) and return each one's (log id, hash)."""
    marks = ", ".join(["(" + ", ".join("?" * len(rows[0])) + ")"] * len(rows))
    returned = con.execute(
        "INSERT INTO query_log (ts, analyst, sql, canonical, data_version, decision, error, reason, "
        f"columns, rows, flags, notes, levels, elapsed_ms, prev_hash, record_hash) VALUES {marks} "
        "RETURNING id, record_hash",
        [value for row in rows for value in row],
    ).fetchall()
    # matched by hash, not by position: the chain makes every record's hash unique
    ids = {str(hash_): int(log_id) for log_id, hash_ in returned}
    return [(ids[hash_], hash_) for hash_ in hashes]


def _insert_beside(
    con: duckdb.DuckDBPyConnection, batch: Sequence[Pending], log_ids: list[int], ignore: bool
) -> None:
    """What the answers of ``batch`` add beside their log rows (``log_ids``); ``ignore``:
    skip released cells the store has already."""
    _insert_releases(con, batch, log_ids, ignore)
    _insert_history(con, batch, log_ids)
    for entry, log_id in zip(batch, log_ids, strict=True):
        if entry.noise is not None:
            _insert_noise(con, entry.record, entry.noise, log_id, entry.ts_text)


def _insert_releases(
    con: duckdb.DuckDBPyConnection, batch: Sequence[Pending], log_ids: list[int], ignore: bool
) -> None:
    rows = [
        [
            entry.record.data_version,
            c.table,
            c.space,
            c.cell_key,
            entry.record.analyst,
            c.status.value,
            log_id,
        ]
        for entry, log_id in zip(batch, log_ids, strict=True)
        for c in entry.releases
    ]
    insert_rows(con, "released_cells", rows, ignore=ignore)


def _insert_history(con: duckdb.DuckDBPyConnection, batch: Sequence[Pending], log_ids: list[int]) -> None:
    rows = [
        [history.data_version, history.table, s.space, s.scope, log_id, i, s.label, s.cells, s.value]
        for entry, log_id in zip(batch, log_ids, strict=True)
        if (history := entry.history) is not None
        for i, s in enumerate(history.sets)
    ]
    if len(rows) <= VALUES_ROWS:
        insert_rows(con, "audit_sets", rows)
        return
    # bytes objects arrive as BLOB and None as NULL only from object columns
    columns = list(zip(*rows, strict=True))
    frame = pd.DataFrame(
        {
            "data_version": columns[0],
            "table_name": columns[1],
            "space": columns[2],
            "scope": columns[3],
            "log_id": np.asarray(columns[4], dtype=np.int64),
            "position": np.asarray(columns[5], dtype=np.int32),
            "label": columns[6],
            "cells": pd.Series(columns[7], dtype=object),
            "value": pd.Series(columns[8], dtype=object),
        }
    )
    insert_frame(con, "audit_sets", frame)


def _insert_noise(
    con: duckdb.DuckDBPyConnection, record: LogRecord, noise: NoiseWrite, log_id: int, ts: str
) -> None:
    if noise.charge is not None:
        entry = noise.charge
        accounts = {account: fraction_text(amount) for account, amount in entry.accounts}
        con.execute(
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
        insert_frame(con, "noise_draws", frame, ignore=True)
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
        insert_frame(con, "noise_received", frame, ignore=True)


def insert_rows(
    con: duckdb.DuckDBPyConnection, table: str, rows: list[list[Any]], ignore: bool = False
) -> None:
    """Insert ``rows`` (each a full row of ``table``) with one statement; ``ignore``: a
    row whose key is already there (or earlier in ``rows``) is skipped, the first kept."""
    if not rows:
        return
    verb = "INSERT OR IGNORE" if ignore else "INSERT"
    if len(rows) > VALUES_ROWS:
        insert_frame(con, table, pd.DataFrame(rows), ignore)
        return
    marks = ", ".join(["(" + ", ".join("?" * len(rows[0])) + ")"] * len(rows))
    con.execute(f"{verb} INTO {table} VALUES {marks}", [value for row in rows for value in row])


def insert_frame(
    con: duckdb.DuckDBPyConnection, table: str, frame: pd.DataFrame, ignore: bool = False
) -> None:
    """Insert the rows of ``frame`` (a full row of ``table`` each) with one statement."""
    verb = "INSERT OR IGNORE" if ignore else "INSERT"
    if len(frame) <= VALUES_ROWS:
        insert_rows(con, table, [list(row) for row in frame.itertuples(index=False, name=None)], ignore)
        return
    con.register("_frame", frame)
    try:
        con.execute(f"{verb} INTO {table} SELECT * FROM _frame")
    finally:
        con.unregister("_frame")
