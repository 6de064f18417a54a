"""Run the outer query on the protected answers, and nothing else.

One in-memory DuckDB per process, empty, with external access off and its configuration
locked when it is created, before any SQL of an analyst runs. Each request gets a fresh
connection to it (a cursor: opening a database costs some 15 ms, a connection
microseconds) holding one TEMP table per inner query — temporary tables belong to their
connection, so no request sees another's — with the protected answer (withheld cells
are NULL: the true values never enter it) and, beside each aggregate column, that
cell's level (0 released, 1 noised, 2 withheld). The graded outer query (``taint.py``)
reads only those tables; the connection is closed, and its tables dropped, after it.
"""

from __future__ import annotations

import decimal
import threading
import time
from collections.abc import Sequence
from typing import Any

import duckdb

from guard.errors import BackendError, GuardError, QueryRejected
from guard.post.plan import OuterPlan
from guard.post.taint import LEVEL_SUFFIX, NOISED, SUPPRESSED
from guard.result import Flag, ProtectedResult

__all__ = ["describe_outer", "run_outer"]

_LOCKED: dict[str, str | int | float | list[str]] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "threads": 1,
    "memory_limit": "256MB",
    "lock_configuration": True,
}
#: seconds the outer query may run: it computes on answers (small tables), but a cross
#: join of several answers grows as their product
TIME_LIMIT = 30.0
#: rows an outer query may return (the answers it reads are aggregate answers)
MAX_ROWS = 1_000_000
#: rows inserted per statement (one prepared INSERT of many rows is much faster than
#: one per row, and DuckDB bounds the parameters of one statement)
_BATCH = 200
_LEVELS = {Flag.RELEASED.value: 0, Flag.NOISED.value: NOISED, Flag.SUPPRESSED.value: SUPPRESSED}


def run_outer(plan: OuterPlan, answers: Sequence[ProtectedResult]) -> ProtectedResult:
    """The outer query's answer, computed from ``answers`` (one per inner query, in
    order), with a flag per value and the inner answers' notes.

    Raises:
        QueryRejected: the computation failed on the answers (an overflow, a cast that
            does not fit).
        BackendError: the in-memory engine failed.
    """
    with _connection(plan, answers) as connection:
        watched = _WATCHDOG.watch(connection, TIME_LIMIT)
        try:
            rows = connection.execute(plan.sql).fetchmany(MAX_ROWS + 1)
        except duckdb.InterruptException:
            raise QueryRejected(
                f"the computation over the protected answers ran longer than {TIME_LIMIT:g} s: "
                "compute less at once (a join of answers grows as the product of their rows)"
            ) from None
        except duckdb.Error as error:
            raise _failed("the computation over the protected answers failed", error) from None
        finally:
            _WATCHDOG.done(watched)
    if len(rows) > MAX_ROWS:
        raise QueryRejected(
            f"the computation over the protected answers returns more than {MAX_ROWS:,} rows: "
            "aggregate it, or add a LIMIT"
        )
    n = len(plan.columns)
    flags_of = {0: Flag.RELEASED.value, NOISED: Flag.NOISED.value, SUPPRESSED: Flag.SUPPRESSED.value}
    values: list[list[Any]] = []
    flags: list[list[str]] = []
    for row in rows:
        levels = [min(int(level or 0), SUPPRESSED) for level in row[n : 2 * n]]
        values.append([None if lv >= SUPPRESSED else v for v, lv in zip(row[:n], levels, strict=True)])
        flags.append([flags_of[lv] for lv in levels])
    notes = list(dict.fromkeys(note for answer in answers for note in answer.notes))
    aggregates = tuple(i for i, graded in enumerate(plan.graded) if graded)
    return ProtectedResult(list(plan.columns), values, flags, notes, aggregates)


def describe_outer(plan: OuterPlan) -> tuple[tuple[str, str], ...]:
    """(name, DuckDB type) of each output, from a run on empty answers: what the
    guard checks before it asks any inner query, and the PostgreSQL Describe reads.

    Raises:
        QueryRejected: the outer query cannot run (a type, a name DuckDB does not know).
    """
    with _connection(plan, None) as connection:
        try:
            description = connection.execute(plan.sql).description or []
        except duckdb.Error as error:
            raise _failed("the query over protected answers cannot run", error) from None
    return tuple((name, str(column[1])) for name, column in zip(plan.columns, description, strict=False))


class _Watchdog:
    """Interrupts the outer queries that overrun their time. One daemon thread looks at
    the running queries a few times a second (a timer thread per query costs more than
    many a query takes to run; a limit of seconds needs no finer aim)."""

    TICK = 0.1

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[int, tuple[float, duckdb.DuckDBPyConnection]] = {}
        self._next = 0
        self._thread: threading.Thread | None = None

    def watch(self, connection: duckdb.DuckDBPyConnection, seconds: float) -> int:
        with self._lock:
            self._next += 1
            self._running[self._next] = (time.monotonic() + seconds, connection)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="post-watchdog", daemon=True)
                self._thread.start()
            return self._next

    def done(self, token: int) -> None:
        with self._lock:
            self._running.pop(token, None)

    def _loop(self) -> None:
        while True:
            time.sleep(self.TICK)
            now = time.monotonic()
            with self._lock:
                overdue = [connection for deadline, connection in self._running.values() if deadline <= now]
            for connection in overdue:
                connection.interrupt()


_WATCHDOG = _Watchdog()
_ENGINE: list[duckdb.DuckDBPyConnection] = []
_ENGINE_LOCK = threading.Lock()


def _engine() -> duckdb.DuckDBPyConnection:
    """The process's empty, locked-down in-memory database (created on first use)."""
    with _ENGINE_LOCK:
        if not _ENGINE:
            _ENGINE.append(duckdb.connect(":memory:", config=dict(_LOCKED)))
        return _ENGINE[0]


def _fresh() -> duckdb.DuckDBPyConnection:
    """A new connection to the engine (made under the lock: the engine's own connection
    object is shared by every thread; each request then uses its own)."""
    engine = _engine()
    with _ENGINE_LOCK:
        return engine.cursor()


class _connection:
    """A fresh connection holding the answers as its TEMP tables (None: empty tables)."""

    def __init__(self, plan: OuterPlan, answers: Sequence[ProtectedResult] | None) -> None:
        self.connection = _fresh()
        try:
            for i, inner in enumerate(plan.inners):
                columns = []
                for name, kind, graded in zip(inner.columns, inner.types, inner.graded, strict=True):
                    columns.append(f"{_ident(name)} {kind}")
                    if graded:
                        columns.append(f"{_ident(name + LEVEL_SUFFIX)} TINYINT")
                self.connection.execute(f"CREATE TEMP TABLE {_ident(inner.table)} ({', '.join(columns)})")
                if answers is not None:
                    self._load(inner.table, inner.graded, answers[i], len(columns))
        except BaseException:
            self.connection.close()
            raise

    def _load(self, table: str, graded: Sequence[bool], answer: ProtectedResult, width: int) -> None:
        rows: list[list[Any]] = []
        for values, flags in zip(answer.rows, answer.flags, strict=True):
            row: list[Any] = []
            for value, flag, has_level in zip(values, flags, graded, strict=True):
                level = _LEVELS.get(flag, SUPPRESSED)  # an unknown flag is withheld
                row.append(None if level >= SUPPRESSED else _plain(value))
                if has_level:
                    row.append(level)
            rows.append(row)
        placeholders = f"({', '.join('?' * width)})"
        for start in range(0, len(rows), _BATCH):
            batch = rows[start : start + _BATCH]
            sql = f"INSERT INTO {_ident(table)} VALUES {', '.join([placeholders] * len(batch))}"
            self.connection.execute(sql, [v for row in batch for v in row])

    def __enter__(self) -> duckdb.DuckDBPyConnection:
        return self.connection

    def __exit__(self, *_: object) -> None:
        self.connection.close()


def _plain(value: Any) -> Any:
    """A value as DuckDB binds it (NaN, which a NULL-free float column cannot tell from a
    number, stays NaN)."""
    if isinstance(value, decimal.Decimal) and not value.is_finite():
        return None
    return value


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _failed(what: str, error: duckdb.Error) -> GuardError:
    """The analyst's computation failed (a type, a cast, an overflow): say so in DuckDB's
    words, which can quote only the released answers (withheld values are not in them);
    the engine itself failing is a BackendError."""
    if isinstance(error, duckdb.OutOfMemoryException | duckdb.InternalException | duckdb.IOException):
        return BackendError(f"{what}: {_first_line(error)}")
    return QueryRejected(f"{what}: {_first_line(error)}")


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0][:200]
