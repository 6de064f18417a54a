"""The store fails closed and says which file: a cut tail, a damaged WAL, a corrupt
database, an empty secret key; and a read-only copy can be verified."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from guard import Guard
from guard.cli.main import main
from guard.errors import BackendError
from guard.state.records import LogRecord, Outcome
from guard.state.store import StateStore

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "policies" / "students.yaml"
QUERIES = [
    "SELECT major, COUNT(*) FROM students GROUP BY major",
    "SELECT sex, COUNT(*) FROM students GROUP BY sex",
    "SELECT COUNT(*) FROM students",
    "SELECT class, COUNT(*) FROM students GROUP BY class",
]


def _filled(state: Path) -> None:
    with Guard.open(POLICY, state=state) as guard:
        for sql in QUERIES:
            guard.query(sql, analyst="alice")


def _verify(state: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["log", "--policy", str(POLICY), "--state", str(state), "--verify"])
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes is not None else "")


def test_cutting_the_tail_of_the_log_is_detected(tmp_path: Path) -> None:
    _filled(tmp_path)
    store = StateStore(tmp_path)
    assert store.verify() == (4, None)
    store._con.execute("DELETE FROM query_log WHERE id >= 3")
    check = store.check_chain()
    assert (check.checked, check.broken, check.missing) == (2, 3, 2)
    store.close()
    code, out = _verify(tmp_path)
    assert code == 3 and "log CUT: 2 record(s) from 3 on are missing" in out


def test_an_intact_log_verifies_and_prints_its_head(tmp_path: Path) -> None:
    _filled(tmp_path)
    code, out = _verify(tmp_path)
    assert code == 0 and "hash chain intact over 4 records; log head: record 4," in out


def test_a_read_only_copy_of_a_state_folder_can_be_verified(tmp_path: Path) -> None:
    _filled(tmp_path / "live")
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "live", copy)
    before = {p.name: p.stat().st_mtime_ns for p in copy.iterdir()}
    for path in copy.iterdir():
        path.chmod(0o444)
    try:
        store = StateStore(copy, read_only=True)
        assert store.verify() == (4, None)
        with pytest.raises(BackendError, match="read-only"):
            store.append(LogRecord(analyst="alice", sql="SELECT 1", decision=Outcome.REJECTED))
        store.close()
        code, _ = _verify(copy)
        assert code == 0
    finally:
        for path in copy.iterdir():
            path.chmod(0o644)
    assert {p.name: p.stat().st_mtime_ns for p in copy.iterdir()} == before  # nothing written


def test_read_only_open_of_a_missing_store_names_the_folder(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="there is no state store at"):
        StateStore(tmp_path / "nowhere", read_only=True)


def test_a_damaged_write_ahead_log_is_not_dropped_silently(tmp_path: Path) -> None:
    _filled(tmp_path)
    wal = tmp_path / "guard.duckdb.wal"
    wal.write_bytes(os.urandom(4096))
    with pytest.raises(BackendError, match=r"write-ahead log .*guard\.duckdb\.wal is damaged"):
        StateStore(tmp_path)
    assert wal.exists()  # kept for inspection


def test_a_sound_write_ahead_log_is_replayed(tmp_path: Path) -> None:
    _filled(tmp_path)
    # a process that commits one record and dies before any checkpoint
    script = (
        "import sys, os; from pathlib import Path; from guard.state.store import StateStore\n"
        "from guard.state.records import LogRecord, Outcome\n"
        "s = StateStore(Path(sys.argv[1])); s._con.execute('PRAGMA disable_checkpoint_on_shutdown')\n"
        "s.append(LogRecord(analyst='alice', sql='SELECT 1', decision=Outcome.REJECTED)); os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True)
    assert (tmp_path / "guard.duckdb.wal").exists()
    store = StateStore(tmp_path)
    assert store.verify() == (5, None)
    store.close()


def test_a_corrupt_store_names_its_file(tmp_path: Path) -> None:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "guard.duckdb").write_bytes(b"not a database" * 100)
    with pytest.raises(BackendError, match=r"cannot open the state store .*guard\.duckdb: .*restore"):
        StateStore(tmp_path)


def test_an_empty_secret_key_is_refused(tmp_path: Path) -> None:
    _filled(tmp_path)
    (tmp_path / "secret.key").write_bytes(b"")
    with pytest.raises(BackendError, match=r"secret key .*secret\.key is empty or truncated"):
        Guard.open(POLICY, state=tmp_path)


class _DiskFull:
    """A connection whose commits fail as on a full disk: an explicit COMMIT (DuckDB then
    ends the transaction itself, so ROLLBACK fails too), and a write outside a
    transaction, which commits as it ends."""

    def __init__(self, con: object) -> None:
        self._con = con
        self._open = False

    def execute(self, sql: str, *args: object) -> object:
        import duckdb

        full = duckdb.IOException('Could not write file "guard.duckdb.wal": No space left on device')
        if sql == "BEGIN":
            self._open = True
        if sql == "COMMIT":
            self._open = False
            self._con.execute("ROLLBACK")  # type: ignore[attr-defined]
            raise full
        if sql == "ROLLBACK":
            raise duckdb.TransactionException("cannot rollback - no transaction is active")
        if sql.startswith("INSERT") and not self._open:
            raise full
        return self._con.execute(sql, *args)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._con, name)


def test_a_full_disk_is_a_store_error_naming_the_store_not_an_internal_error(tmp_path: Path) -> None:
    with Guard.open(POLICY, state=tmp_path) as guard:
        guard.query(QUERIES[0], analyst="alice")
        real = guard.store._con
        guard.store._con = _DiskFull(real)  # type: ignore[assignment]
        with pytest.raises(
            BackendError, match=r"cannot write the query log in .*guard\.duckdb: .*No space left"
        ):
            guard.query(QUERIES[1], analyst="alice")
        guard.store._con = real
        assert guard.query(QUERIES[1], analyst="alice").rows  # it recovers once there is room
        assert guard.store.verify() == (2, None)
