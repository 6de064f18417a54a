"""The Spark back-end: a Parquet snapshot behind session views, queried read-only.

Spark in local mode has no users or grants, so "read-only" here means:

- the guard queries a snapshot (:mod:`guard.backends.spark_snapshot`), never the live
  source; the snapshot holds no identifier columns, and queries only read it;
- only guard-generated sqlglot trees run, never analyst text, and each is checked
  before it is rendered: a single query (no DDL, DML, SET, CACHE, ... anywhere in the
  tree), reading only the policy's tables (registered as temporary views of this
  backend's own session) and the query's own CTEs, calling no JVM method (reflect);
- the session runs with ``spark.sql.runSQLOnFiles=false`` (no ``parquet.`/path```);
  a local session is started with an in-memory catalog (no Hive) and no web UI.

With Spark Connect (``backend.remote``, production), the server should moreover run
the guard's sessions as a user with read access to the source tables and write access
to the snapshot folder only; the checks above still apply.

Spark shares one JVM per process: the first local backend starts it (a few seconds),
later ones reuse it, each in a new session with its own views. ``close()`` drops the
views; the JVM lives until the process ends.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Collection
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JError
from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import Row, SparkSession
from sqlglot import exp
from sqlglot.errors import SqlglotError

from guard.backends.base import Backend, Capabilities, KeyedHash, ResultSet, TableInfo, TopN, plain_rows
from guard.backends.spark_snapshot import Snapshot, export_files, snapshot_folder, snapshot_table
from guard.errors import BackendError, PolicyError
from guard.policy.model import Policy, SourceKind

__all__ = ["SPARK_CAPABILITIES", "SparkBackend", "check_query"]

SPARK_CAPABILITIES = Capabilities(
    dialect="spark",
    filtered_aggregates=True,
    # two-pass max-and-join: 0.30x the window template on PostgreSQL, 0.42x on Spark
    # (1M rows, one row per unit; about even on panel data): benchmarks/bench_topn.py
    top_n=TopN.MAX_JOIN,
    list_merge=False,
    keyed_hash=KeyedHash.XXHASH64,
    ordered_aggregates=False,
    single_key_grouping=True,
)
DEFAULT_MASTER = "local[2]"

#: set when a local session (and its JVM) is started; fixed for the JVM's lifetime
_STATIC_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.catalogImplementation": "in-memory",
    "spark.ui.showConsoleProgress": "false",
}
#: set on every session the backend opens
_SESSION_CONF = {
    "spark.sql.runSQLOnFiles": "false",
    # DuckDB's snapshot writes zone-less timestamps; no answer may depend on the host's zone
    "spark.sql.session.timeZone": "UTC",
    # overflow and bad casts fail instead of wrapping silently (the default from Spark 4)
    "spark.sql.ansi.enabled": "true",
}
#: local mode: two cores need a handful of shuffle partitions, not Spark's 200
_LOCAL_CONF = {"spark.sql.shuffle.partitions": "4"}

#: statements and clauses that are not a read: refused anywhere in a tree
_NOT_READS: tuple[type[exp.Expr], ...] = (
    exp.DDL,
    exp.DML,
    exp.Command,
    exp.Set,
    exp.Use,
    exp.Cache,
    exp.Uncache,
    exp.Refresh,
    exp.LoadData,
    exp.Into,
    exp.Pragma,
    exp.Transaction,
    exp.Commit,
    exp.Rollback,
    exp.Describe,
    exp.Show,
    exp.Alter,
    exp.Drop,
    exp.TruncateTable,
    exp.Analyze,
    exp.Grant,
    exp.Revoke,
    exp.Declare,
    exp.Execute,
    exp.Comment,
    exp.Kill,
    exp.Attach,
    exp.Detach,
    exp.Install,
)
#: Spark functions that call arbitrary static JVM methods
_JVM_CALLS = frozenset({"reflect", "java_method", "try_reflect"})

_START_LOCK = threading.Lock()


class SparkBackend(Backend):
    capabilities = SPARK_CAPABILITIES

    def __init__(self, policy: Policy) -> None:
        self._policy = policy
        folder = snapshot_folder(policy)
        self._spark = _open_session(policy, folder)
        try:
            snapshots = self._build(folder)
            for snapshot in snapshots:
                self._spark.read.parquet(str(snapshot.path)).createOrReplaceTempView(snapshot.table)
        except (PySparkException, Py4JError) as exc:
            self._release()
            raise PolicyError(
                f"{policy.path.name}: cannot load the protected tables into Spark: {_message(exc)}"
            ) from None
        except BaseException:
            self._release()
            raise
        self._infos = {s.table.lower(): s.info for s in snapshots}

    def _build(self, folder: Path) -> list[Snapshot]:
        policy = self._policy
        files = tuple(t for t in policy.tables if t.source.kind is not SourceKind.TABLE)
        snapshots = export_files(policy, files, folder) if files else []
        snapshots += [
            snapshot_table(self._spark, policy, t, folder)
            for t in policy.tables
            if t.source.kind is SourceKind.TABLE
        ]
        return snapshots

    def table_info(self, table: str) -> TableInfo:
        return self._infos[table.lower()]

    def execute(self, query: exp.Expr) -> ResultSet:
        check_query(query, self._infos)
        try:
            text = self.sql(query)
        except SqlglotError as exc:
            raise BackendError(
                f"the guard's query cannot be written in Spark SQL: {str(exc).splitlines()[0]}"
            ) from None
        # one SparkSession serves every thread: PySpark pins each Python thread to its
        # own JVM thread, and Spark schedules concurrent jobs of one session
        try:
            frame = self._spark.sql(text)
            rows = frame.collect()
            columns = tuple(frame.columns)
        except (PySparkException, Py4JError) as exc:
            raise BackendError(f"the data engine failed: {_message(exc)}") from None
        return ResultSet(columns, plain_rows([_plain_row(row) for row in rows]))

    def close(self) -> None:
        self._release()

    def _release(self) -> None:
        with contextlib.suppress(Exception):
            for table in self._policy.tables:
                self._spark.catalog.dropTempView(table.name)
        if "remote" in self._policy.backend.options:
            # a Connect session is the server's to keep until released
            with contextlib.suppress(Exception):
                self._spark.stop()


def check_query(query: exp.Expr, tables: Collection[str]) -> None:
    """Refuse a tree that is not one read of the protected tables.

    ``tables`` holds the lower-cased names of the registered views; the query's own
    CTEs may be read too. Raises BackendError (the guard never generates such a tree).
    """
    if not isinstance(query, exp.Query):
        raise BackendError(f"the Spark backend runs queries only, not {type(query).__name__}")
    for node in query.walk():
        if isinstance(node, _NOT_READS):
            raise BackendError(f"the Spark backend runs queries only; the tree holds {type(node).__name__}")
        if isinstance(node, exp.Anonymous) and str(node.name).lower() in _JVM_CALLS:
            raise BackendError(f"the Spark backend refuses the function {node.name}")
    ctes = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
    for table in query.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            raise BackendError("the Spark backend reads declared tables only, not a table function")
        if table.db or table.catalog:
            raise BackendError(
                f"the Spark backend reads declared tables only, not {table.sql(dialect='spark')}"
            )
        name = table.name.lower()
        if name not in tables and name not in ctes:
            raise BackendError(f"the Spark backend reads declared tables only, not {table.name!r}")


def _open_session(policy: Policy, folder: Path) -> SparkSession:
    options = policy.backend.options
    _quiet_error_logs()
    try:
        if "remote" in options:
            builder = SparkSession.builder.remote(options["remote"])
            # create(): a session of our own on the server, so views never collide
            spark = builder.create()
        else:
            builder = SparkSession.builder.master(options.get("master", DEFAULT_MASTER)).appName("statguard")
            for key, value in {**_STATIC_CONF, **_SESSION_CONF, **_LOCAL_CONF}.items():
                builder = builder.config(key, value)
            # a warehouse under the snapshot folder: Spark would otherwise make one in the cwd
            builder = builder.config("spark.sql.warehouse.dir", str(folder / "warehouse"))
            with _START_LOCK:
                # the first session starts the JVM; each backend then gets its own session
                spark = builder.getOrCreate().newSession()
            for key, value in _LOCAL_CONF.items():
                spark.conf.set(key, value)
        for key, value in _SESSION_CONF.items():
            spark.conf.set(key, value)
    except ImportError as exc:
        missing = f" ({exc.name})" if exc.name else ""
        raise BackendError(
            f"Spark Connect needs a library that is not installed{missing}: pip install 'pyspark[connect]'"
        ) from None
    except (PySparkException, Py4JError, OSError, RuntimeError) as exc:
        where = options.get("remote") or options.get("master", DEFAULT_MASTER)
        raise BackendError(
            f"cannot start a Spark session on {where} ({_message(exc)}); check backend.master or "
            "backend.remote, and that Java 17+ is installed"
        ) from None
    return spark


def _quiet_error_logs() -> None:
    """PySpark logs every failed query with its JVM stack trace, whose message may quote a
    data value; the guard reports engine errors itself (first line, see _message)."""
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # PySpark 3.5 does not log them
        return
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


def _message(exc: BaseException) -> str:
    """The engine's message for an error: its first line, without the JVM stack trace.

    An analysis error speaks of the query's text; a runtime error (a bad cast, an
    overflow) may quote a data value, so only its error class is shown.
    """
    if isinstance(exc, PySparkException):
        condition = exc.getCondition() if hasattr(exc, "getCondition") else exc.getErrorClass()
        if not isinstance(exc, AnalysisException) and condition:
            return f"[{condition}] (a runtime error; its message may quote data and is not shown)"
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _plain(value: Any) -> Any:
    if isinstance(value, Row):
        return tuple(_plain(v) for v in value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _plain_row(row: Row) -> tuple[Any, ...]:
    return tuple(_plain(v) for v in row)
