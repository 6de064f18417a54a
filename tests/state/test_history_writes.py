"""A batch of records round-trips exactly: log rows chained in order, released cells and
audit history rows, written as literal rows or as one frame."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from guard.state.chain import GENESIS, record_hash
from guard.state.commit import Pending
from guard.state.records import AuditedSet, HistoryWrite, LogRecord, Outcome, Release, ReleaseStatus
from guard.state.writes import VALUES_ROWS, encoded_fields, insert_batch

SCHEMA = Path(__file__).resolve().parents[2] / "sql" / "state.sql"


def _store() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(SCHEMA.read_text())
    return con


def _entry(n: int, sets: tuple[AuditedSet, ...] = (), releases: tuple[Release, ...] = ()) -> Pending:
    record = LogRecord(analyst="alice", sql=f"SELECT {n}", decision=Outcome.ANSWERED, data_version="v1")
    history = HistoryWrite("v1", "people", sets) if sets else None
    return Pending(
        record,
        encoded_fields(record),
        f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}",
        list(releases),
        None,
        history,
    )


def _sets(count: int) -> tuple[AuditedSet, ...]:
    return tuple(
        AuditedSet(
            space="sum(income)" if i % 2 else "count",
            scope="all",
            label=f"region={i}",
            cells=bytes([i % 256, 0, 255]) * (i % 7),  # empty blobs too
            value=None if i % 3 == 0 else i * 0.1,
        )
        for i in range(count)
    )


@pytest.mark.parametrize("count", [1, VALUES_ROWS, VALUES_ROWS + 1, 5_000])
def test_history_rows_round_trip(count: int) -> None:
    con = _store()
    sets = _sets(count)
    [(log_id, _)] = insert_batch(con, [_entry(1, sets)], GENESIS)
    rows = con.execute(
        "SELECT data_version, table_name, space, scope, log_id, position, label, cells, value "
        "FROM audit_sets ORDER BY position"
    ).fetchall()
    assert rows == [
        ("v1", "people", s.space, s.scope, log_id, i, s.label, s.cells, s.value) for i, s in enumerate(sets)
    ]


def test_an_all_null_value_column_is_written_as_nulls() -> None:
    con = _store()
    sets = tuple(AuditedSet("count", "all", str(i), b"\x01", None) for i in range(VALUES_ROWS + 5))
    insert_batch(con, [_entry(1, sets)], GENESIS)
    assert con.execute("SELECT count(*), count(value) FROM audit_sets").fetchone() == (VALUES_ROWS + 5, 0)


@pytest.mark.parametrize("records", [3, VALUES_ROWS + 2])
def test_a_batch_is_chained_in_order_with_each_records_rows(records: int) -> None:
    con = _store()
    cell = Release("people", "count", '["x"]', ReleaseStatus.PUBLISHED)
    entries = [_entry(n, _sets(n % 4), (cell,) * (n % 2)) for n in range(records)]
    chained = insert_batch(con, entries, GENESIS)
    logged = con.execute("SELECT id, sql, prev_hash, record_hash FROM query_log ORDER BY id").fetchall()
    assert [(i, h) for i, _, _, h in logged] == chained
    assert [sql for _, sql, _, _ in logged] == [f"SELECT {n}" for n in range(records)]  # queue order
    previous = GENESIS
    for entry, (_, _, prev_hash, hash_) in zip(entries, logged, strict=True):
        assert prev_hash == previous and hash_ == record_hash(previous, entry.ts_text, entry.encoded)
        previous = hash_
    per_record = dict(con.execute("SELECT log_id, count(*) FROM audit_sets GROUP BY log_id").fetchall())
    assert per_record == {chained[n][0]: n % 4 for n in range(records) if n % 4}
    # the same cell released twice in one batch keeps the first record's row
    assert con.execute("SELECT log_id FROM released_cells").fetchall() == [(chained[1][0],)]
