"""The audit history's rows round-trip exactly, written one by one or as one frame."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from guard.state.records import AuditedSet, HistoryWrite
from guard.state.writes import ROW_BY_ROW, insert_history

SCHEMA = Path(__file__).resolve().parents[2] / "sql" / "state.sql"


@pytest.mark.parametrize("count", [1, ROW_BY_ROW, ROW_BY_ROW + 1, 5_000])
def test_history_rows_round_trip(count: int) -> None:
    con = duckdb.connect()
    con.execute(SCHEMA.read_text())
    sets = tuple(
        AuditedSet(
            space="sum(income)" if i % 2 else "count",
            scope="all",
            label=f"region={i}",
            cells=bytes([i % 256, 0, 255]) * (i % 7),  # empty blobs too
            value=None if i % 3 == 0 else i * 0.1,
        )
        for i in range(count)
    )
    insert_history(con, HistoryWrite("v1", "people", sets), log_id=42)
    rows = con.execute(
        "SELECT data_version, table_name, space, scope, log_id, position, label, cells, value "
        "FROM audit_sets ORDER BY position"
    ).fetchall()
    assert rows == [
        ("v1", "people", s.space, s.scope, 42, i, s.label, s.cells, s.value) for i, s in enumerate(sets)
    ]


def test_an_all_null_value_column_is_written_as_nulls() -> None:
    con = duckdb.connect()
    con.execute(SCHEMA.read_text())
    sets = tuple(AuditedSet("count", "all", str(i), b"\x01", None) for i in range(ROW_BY_ROW + 5))
    insert_history(con, HistoryWrite("v1", "people", sets), log_id=1)
    assert con.execute("SELECT count(*), count(value) FROM audit_sets").fetchone() == (ROW_BY_ROW + 5, 0)
