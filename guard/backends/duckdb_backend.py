"""The embedded DuckDB back-end: a private snapshot, opened read-only and locked down.

The snapshot is built once per data version from the policy's sources (CSV, Parquet or
a DuckDB file) into ``STATE/snapshots/``; only declared dimensions and measures are
copied, plus the guard's ``_rid`` and ``_uid`` columns. Queries then run on a connection
opened ``read_only`` with ``enable_external_access=false`` and the configuration locked,
so even a statement that slipped past validation could not read a file, attach a
database, install an extension or change a setting.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import numpy.typing as npt
from sqlglot import exp

from guard.backends.base import DUCKDB_CAPABILITIES, Backend, ResultSet, TableInfo, plain_rows
from guard.backends.derive import check_maps, derived_sql
from guard.backends.derive import declaration as derivations
from guard.engines import NUMERIC_TYPES
from guard.errors import BackendError, PolicyError
from guard.policy.model import Policy, Role, SourceKind, Table
from guard.sqlfiles import read_sql, statements

__all__ = ["DuckDBBackend", "file_snapshot"]

_LOCKED = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "lock_configuration": True,
}
_HASH_CHUNK = 1 << 20


def _ident(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql(dialect="duckdb")


def _literal(text: str) -> str:
    return exp.Literal.string(text).sql(dialect="duckdb")


class DuckDBBackend(Backend):
    capabilities = DUCKDB_CAPABILITIES

    def __init__(self, policy: Policy) -> None:
        self._policy = policy
        in_engine = [t.name for t in policy.tables if t.source.kind is SourceKind.TABLE]
        if in_engine:
            raise PolicyError(
                f"{policy.path.name}: tables.{in_engine[0]}.source: a table source lives in a "
                "postgres or spark engine; the duckdb backend reads files (csv, parquet, duckdb)"
            )
        path = file_snapshot(policy, policy.tables)
        try:
            self._connection = duckdb.connect(str(path), read_only=True, config=dict(_LOCKED))
        except duckdb.Error as exc:
            raise BackendError(f"cannot open the data snapshot {path.name}: {exc}") from None
        self._local = threading.local()
        self._lock = threading.Lock()
        self._infos = self._read_infos()

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        # DuckDB connections are not safe to share between threads; each thread gets its
        # own cursor on the same read-only database.
        cursor = getattr(self._local, "cursor", None)
        if cursor is None:
            with self._lock:
                cursor = self._connection.cursor()
            self._local.cursor = cursor
        return cursor

    def _read_infos(self) -> dict[str, TableInfo]:
        rows = self._connection.execute("SELECT name, info FROM _guard_tables").fetchall()
        infos = {}
        for name, info in rows:
            infos[name.lower()] = TableInfo.from_document(name, json.loads(info))
        return infos

    def table_info(self, table: str) -> TableInfo:
        return self._infos[table.lower()]

    def execute_columns(self, query: exp.Expr) -> dict[str, npt.NDArray[Any]]:
        text = self.sql(query)
        try:
            columns = self._cursor().execute(text).fetchnumpy()
        except duckdb.Error as exc:
            raise BackendError(f"the data engine failed: {str(exc).splitlines()[0]}") from None
        return {name: np.asarray(values) for name, values in columns.items()}

    def execute(self, query: exp.Expr) -> ResultSet:
        text = self.sql(query)
        try:
            cursor = self._cursor().execute(text)
            rows = cursor.fetchall()
            columns = tuple(d[0] for d in cursor.description or ())
        except duckdb.Error as exc:
            # the message may quote the guard's own query text, never a data value
            raise BackendError(f"the data engine failed: {str(exc).splitlines()[0]}") from None
        return ResultSet(columns, plain_rows(rows))

    def close(self) -> None:
        with contextlib.suppress(duckdb.Error):
            self._connection.close()


def file_snapshot(policy: Policy, tables: tuple[Table, ...]) -> Path:
    """The DuckDB snapshot of ``tables`` (file sources), built if this version lacks one.

    It is the canonical loader of files for every back-end: PostgreSQL and Spark copy
    its tables, so a CSV's types and the guard's _rid/_uid/_ukey are the same whichever
    engine answers. Holds ``_guard_tables`` (name, info JSON) besides the tables.
    """
    versions = _table_versions(policy, tables)
    version = hashlib.sha256("".join(versions.values()).encode()).hexdigest()
    folder = policy.state_dir / "snapshots"
    path = folder / f"{policy.name}-{version[:16]}.duckdb"
    if not path.exists():
        _build_snapshot(policy, path, versions, tables)
    return path


def _table_versions(policy: Policy, tables: tuple[Table, ...]) -> dict[str, str]:
    """Fingerprint of each table: its declaration and its source file's bytes.

    Hashing a multi-GB source on every open would cost seconds, so a file's digest is
    cached in the state folder under its (path, size, modification time).
    """
    cache_path = policy.state_dir / "snapshots" / "fingerprints.json"
    try:
        cache: dict[str, dict[str, object]] = json.loads(cache_path.read_text())
    except (OSError, ValueError):
        cache = {}
    versions = {}
    for table in tables:
        digest = hashlib.sha256()
        # "snapshot 2": the snapshot's layout (2 added _ukey); a new layout is a new version
        declaration: list[object] = ["snapshot 2", table.name, table.privacy_unit, table.source.kind.value]
        declaration += [table.source.table, *([c.name, c.role.value] for c in table.stored)]
        # a change of bands or map is a new version (and snapshot): never old bands
        declaration += derivations(table)
        digest.update(json.dumps(declaration).encode())
        digest.update(_file_digest(table, cache).encode())
        versions[table.name] = digest.hexdigest()
    with contextlib.suppress(OSError):
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        cache_path.write_text(json.dumps(cache))
    return versions


def _file_digest(table: Table, cache: dict[str, dict[str, object]]) -> str:
    path = table.source.file
    try:
        stat = path.stat()
        entry = cache.get(str(path))
        if entry and entry.get("size") == stat.st_size and entry.get("mtime_ns") == stat.st_mtime_ns:
            return str(entry["sha256"])
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            while chunk := handle.read(_HASH_CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise PolicyError(
            f"{table.name}: cannot read the source {path} ({exc.strerror}): "
            f"fix tables.{table.name}.source in the policy"
        ) from None
    cache[str(path)] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest.hexdigest()}
    return digest.hexdigest()


def _source_sql(table: Table) -> str:
    path = _literal(str(table.source.file))
    if table.source.kind is SourceKind.CSV:
        return f"read_csv({path}, header = true)"
    if table.source.kind is SourceKind.PARQUET:
        return f"read_parquet({path})"
    return f"src.{_ident(table.source.table or table.name)}"


def _build_snapshot(policy: Policy, path: Path, versions: dict[str, str], tables: tuple[Table, ...]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    con = duckdb.connect(str(partial))
    try:
        con.execute("CREATE TABLE _guard_tables (name VARCHAR, info JSON)")
        for table in tables:
            _snapshot_table(con, policy, table, versions[table.name])
        con.execute("CHECKPOINT")
    except duckdb.Error as exc:
        con.close()
        partial.unlink(missing_ok=True)
        raise PolicyError(
            f"{policy.path.name}: cannot load the protected tables: {str(exc).splitlines()[0]}"
        ) from None
    except BaseException:
        con.close()
        partial.unlink(missing_ok=True)
        raise
    con.close()
    os.replace(partial, path)
    for old in path.parent.glob(f"{policy.name}-*.duckdb"):
        if old != path:
            old.unlink(missing_ok=True)


def _snapshot_table(con: duckdb.DuckDBPyConnection, policy: Policy, table: Table, version: str) -> None:
    attached = table.source.kind is SourceKind.DUCKDB
    if attached:
        con.execute(f"ATTACH {_literal(str(table.source.file))} AS src (READ_ONLY)")
    try:
        source = _source_sql(table)
        available = {
            row[0].lower(): (row[0], row[1])
            for row in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
        }
        wanted = [c for c in table.stored if c.role is not Role.IDENTIFIER or c.name == table.privacy_unit]
        for column in wanted:
            if column.name.lower() not in available:
                close = difflib.get_close_matches(column.name.lower(), list(available), n=1)
                hint = f" (did you mean {available[close[0]][0]!r}?)" if close else ""
                raise PolicyError(
                    f"{policy.path.name}: tables.{table.name}.columns.{column.name}: "
                    f"not a column of the source {table.source.file.name}{hint}"
                )
            source_type = available[column.name.lower()][1]
            if column.role is Role.MEASURE and source_type.split("(")[0] not in NUMERIC_TYPES:
                raise PolicyError(
                    f"{policy.path.name}: tables.{table.name}.columns.{column.name}: a measure "
                    f"must be numeric, the source has {source_type}"
                )
        published = [c for c in table.stored if c.role is not Role.IDENTIFIER]
        types = {c.name.lower(): available[c.name.lower()][1] for c in published}
        derived = derived_sql(policy, table, types, "duckdb", "s")
        names = {
            "staging": _ident(f"_staging_{table.name}"),
            "units": _ident(f"_units_{table.name}"),
            "table": _ident(table.name),
            "source": source,
            "unit": _ident(available[table.privacy_unit.lower()][0]),
            "columns": ", ".join(
                f"{_ident(available[c.name.lower()][0])} AS {_ident(c.name)}" for c in published
            ),
            "qualified_columns": ", ".join([*(f"s.{_ident(c.name)}" for c in published), *derived]),
        }
        for statement in statements(read_sql("snapshot.sql")):
            con.execute(statement.format(**names))
    finally:
        if attached:
            con.execute("DETACH src")
    relation = exp.to_table(table.name, quoted=True)
    check_maps(policy, table, relation, "duckdb", lambda query: con.execute(query).fetchall())
    _record_info(con, table, version)


def _record_info(con: duckdb.DuckDBPyConnection, table: Table, version: str) -> None:
    name = _ident(table.name)
    published = [c for c in table.columns if c.role is not Role.IDENTIFIER]
    types = {
        row[0].lower(): row[1]
        for row in con.execute(f"DESCRIBE {name}").fetchall()
        if not row[0].startswith("_")
    }
    counts = ", ".join(f"COUNT(DISTINCT _uid) FILTER (WHERE {_ident(c.name)} IS NOT NULL)" for c in published)
    row = con.execute(f"SELECT COUNT(*), COUNT(DISTINCT _uid), {counts} FROM {name}").fetchone()
    assert row is not None
    rows, units, *per_column = row
    info = {
        "types": types,
        "rows": rows,
        "units": units,
        "units_with_value": {c.name.lower(): n for c, n in zip(published, per_column, strict=True)},
        "one_row_per_unit": rows == units,
        "data_version": version,
    }
    con.execute("INSERT INTO _guard_tables VALUES (?, ?)", [table.name, json.dumps(info)])
