"""How a batch is committed: log rows alone in one statement (its own transaction), a
batch that adds released cells in one explicit transaction; either way all of it or
nothing, and a commit that reports a failure after writing is not written twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from guard.state.chain import GENESIS
from guard.state.records import Release, ReleaseStatus
from guard.state.writes import commit_batch

from .test_history_writes import _entry

SCHEMA = Path(__file__).resolve().parents[2] / "sql" / "state.sql"


class _Recording:
    """A connection that lists the statements run on it and can fail one kind."""

    def __init__(self, fail: str | None = None, after: bool = False) -> None:
        self.con = duckdb.connect()
        self.con.execute(SCHEMA.read_text())
        self.run: list[str] = []
        self.texts: list[str] = []
        self.fail, self.after = fail, after

    def execute(self, sql: str, *args: Any) -> Any:
        self.run.append(sql.split()[0])
        self.texts.append(sql)
        if self.fail is not None and sql.startswith(self.fail):
            if self.after:  # written, then reported as failed (as a commit whose reply is lost)
                self.con.execute(sql, *args)
            raise duckdb.IOException("No space left on device")
        return self.con.execute(sql, *args)

    def rows(self, table: str) -> int:
        found = self.con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
        assert found is not None
        return int(found[0])


RELEASE = Release("people", "count", '["x"]', ReleaseStatus.PUBLISHED)


def test_log_rows_alone_are_one_statement() -> None:
    con = _Recording()
    chained = commit_batch(con, [_entry(1), _entry(2)], GENESIS, Path("x"))  # type: ignore[arg-type]
    assert con.run == ["INSERT"] and chained is not None and len(chained) == 2
    assert con.rows("query_log") == 2


def test_a_batch_with_released_cells_is_one_transaction() -> None:
    con = _Recording()
    batch = [_entry(1), _entry(2, releases=(RELEASE,))]
    assert commit_batch(con, batch, GENESIS, Path("x")) is not None  # type: ignore[arg-type]
    assert con.run == ["BEGIN", "INSERT", "INSERT", "COMMIT"]
    assert (con.rows("query_log"), con.rows("released_cells")) == (2, 1)
    assert not any("OR IGNORE" in text for text in con.texts)  # the plain insert, when no key is there


def _statuses(con: _Recording) -> list[tuple[str, str, int]]:
    found = con.con.execute("SELECT cell_key, status, log_id FROM released_cells ORDER BY cell_key")
    return [(str(key), str(status), int(log_id)) for key, status, log_id in found.fetchall()]


def test_a_released_cell_already_stored_keeps_its_first_status() -> None:
    con = _Recording()
    assert commit_batch(con, [_entry(1, releases=(RELEASE,))], GENESIS, Path("x")) is not None  # type: ignore[arg-type]
    previous = con.con.execute("SELECT record_hash FROM query_log").fetchone()
    assert previous is not None
    withheld = Release("people", "count", '["x"]', ReleaseStatus.WITHHELD)
    other = Release("people", "count", '["y"]', ReleaseStatus.WITHHELD)
    con.run.clear()
    batch = [_entry(2, releases=(withheld, other)), _entry(3)]
    chained = commit_batch(con, batch, str(previous[0]), Path("x"))  # type: ignore[arg-type]
    # the plain insert meets the stored key: the whole batch again, skipping it (the
    # attempt drew ids from the sequence, which no rollback returns: ids may skip)
    assert con.run == ["BEGIN", "INSERT", "INSERT", "ROLLBACK", "BEGIN", "INSERT", "INSERT", "COMMIT"]
    assert chained is not None and con.rows("query_log") == 3
    first, second = (log_id for log_id, _ in chained)
    assert 1 < first < second
    assert _statuses(con) == [('["x"]', "published", 1), ('["y"]', "withheld", first)]


def test_a_cell_released_twice_in_one_batch_keeps_the_first() -> None:
    con = _Recording()
    withheld = Release("people", "count", '["x"]', ReleaseStatus.WITHHELD)
    batch = [_entry(1, releases=(RELEASE,)), _entry(2, releases=(withheld,))]
    chained = commit_batch(con, batch, GENESIS, Path("x"))  # type: ignore[arg-type]
    assert chained is not None and con.rows("query_log") == 2
    assert _statuses(con) == [('["x"]', "published", chained[0][0])]


def test_a_failed_write_leaves_nothing() -> None:
    cases = (("INSERT INTO query_log", [_entry(1)]), ("INSERT INTO rel", [_entry(1, releases=(RELEASE,))]))
    for fail, batch in cases:
        con = _Recording(fail)
        assert commit_batch(con, batch, GENESIS, Path("state")) is None  # type: ignore[arg-type]
        assert batch[0].error is not None and "state" in str(batch[0].error)
        assert (con.rows("query_log"), con.rows("released_cells")) == (0, 0)


def test_a_write_reported_failed_after_it_was_committed_is_not_retried() -> None:
    con = _Recording("INSERT INTO query_log", after=True)
    chained = commit_batch(con, [_entry(1), _entry(2)], GENESIS, Path("x"))  # type: ignore[arg-type]
    assert chained is not None and [log_id for log_id, _ in chained] == [1, 2]
    assert con.rows("query_log") == 2
