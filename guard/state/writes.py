"""The rows of one log record, inside its transaction: the log row itself, and what an
answer adds beside it (the released-cell links, the noise ledger charge, draws and
received keys, and the history audit's query sets)."""

from __future__ import annotations

import json
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from guard.state.commit import Pending
from guard.state.records import HistoryWrite, LogRecord, NoiseWrite, Release, fraction_text

__all__ = [
    "encoded_fields",
    "insert_frame",
    "insert_history",
    "insert_noise",
    "insert_record",
    "insert_releases",
]

#: up to this many rows, an insert goes row by row instead of through a registered frame
ROW_BY_ROW = 16


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
    }
    return {k: json.dumps(v, default=str) if isinstance(v, list) else v for k, v in fields.items()}


def insert_record(con: duckdb.DuckDBPyConnection, entry: Pending, prev_hash: str, hash_: str) -> int:
    """Insert ``entry``'s log row (chained after ``prev_hash``) and what its answer adds,
    in the caller's transaction; returns its log id."""
    record, encoded = entry.record, entry.encoded
    row = con.execute(
        "INSERT INTO query_log (ts, analyst, sql, canonical, data_version, decision, "
        "error, reason, columns, rows, flags, notes, elapsed_ms, prev_hash, record_hash) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        [
            entry.ts_text,
            *(encoded[k] for k in _ENCODED),
            record.elapsed_ms,
            prev_hash,
            hash_,
        ],
    ).fetchone()
    assert row is not None
    log_id = int(row[0])
    if entry.releases:
        insert_releases(con, record, entry.releases, log_id)
    if entry.noise is not None:
        insert_noise(con, record, entry.noise, log_id, entry.ts_text)
    if entry.history is not None:
        insert_history(con, entry.history, log_id)
    return log_id


#: the encoded fields in the order of the log row's columns
_ENCODED = (
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
)


def insert_releases(
    con: duckdb.DuckDBPyConnection, record: LogRecord, releases: list[Release], log_id: int
) -> None:
    # one bulk insert from a data frame: executemany inserts row by row (seconds for
    # a few thousand cells)
    frame = pd.DataFrame(
        {
            "data_version": [record.data_version] * len(releases),
            "table_name": [c.table for c in releases],
            "space": [c.space for c in releases],
            "cell_key": [c.cell_key for c in releases],
            "analyst": [record.analyst] * len(releases),
            "status": [c.status.value for c in releases],
            "log_id": [log_id] * len(releases),
        }
    )
    insert_frame(con, "released_cells", frame)


def insert_noise(
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
        insert_frame(con, "noise_draws", frame)
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
        insert_frame(con, "noise_received", frame)


def insert_history(con: duckdb.DuckDBPyConnection, history: HistoryWrite, log_id: int) -> None:
    sets = history.sets
    if len(sets) <= ROW_BY_ROW:
        rows = [
            [history.data_version, history.table, s.space, s.scope, log_id, i, s.label, s.cells, s.value]
            for i, s in enumerate(sets)
        ]
        con.executemany("INSERT INTO audit_sets VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        return
    # one statement for a large answer: executemany costs ~0.15 ms a row (1.3 s for
    # 8,000 cells), a frame ~1 ms in all; bytes objects arrive as BLOB, None as NULL
    frame = pd.DataFrame(
        {
            "data_version": [history.data_version] * len(sets),
            "table_name": [history.table] * len(sets),
            "space": [s.space for s in sets],
            "scope": [s.scope for s in sets],
            "log_id": np.full(len(sets), log_id, dtype=np.int64),
            "position": np.arange(len(sets), dtype=np.int32),
            "label": [s.label for s in sets],
            "cells": pd.Series([s.cells for s in sets], dtype=object),
            "value": pd.Series([s.value for s in sets], dtype=object),
        }
    )
    con.register("_history", frame)
    try:
        con.execute("INSERT INTO audit_sets SELECT * FROM _history")
    finally:
        con.unregister("_history")


def insert_frame(con: duckdb.DuckDBPyConnection, table: str, frame: pd.DataFrame) -> None:
    if len(frame) <= ROW_BY_ROW:
        # registering a frame costs ~1 ms whatever its size: few rows go one by one
        marks = ", ".join("?" * len(frame.columns))
        rows = [list(row) for row in frame.itertuples(index=False, name=None)]
        con.executemany(f"INSERT OR IGNORE INTO {table} VALUES ({marks})", rows)
        return
    con.register("_frame", frame)
    try:
        con.execute(f"INSERT OR IGNORE INTO {table} SELECT * FROM _frame")
    finally:
        con.unregister("_frame")
