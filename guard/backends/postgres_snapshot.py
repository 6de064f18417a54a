"""Snapshots of the protected tables inside PostgreSQL, one per data version.

File sources (CSV, Parquet, DuckDB) go through the canonical DuckDB loader
(:func:`guard.backends.duckdb_backend.file_snapshot`) and are then streamed into
PostgreSQL with COPY, so types, ``_rid``, ``_uid`` and ``_ukey`` and the TableInfo
(data version included) are those every other engine sees. TABLE sources are copied
inside PostgreSQL by ``sql/postgres_table.sql``; their data version hashes the
declaration and an in-engine content fingerprint, so changed data is a new version.

Snapshot tables are named ``{table}_{version[:12]}`` in the guard's schema and listed
in ``_guard_tables`` (``sql/postgres_registry.sql``). A current snapshot is reused;
a missing one is built by the owner role (``backend.owner_dsn``), which then grants
the query role USAGE on the schema and SELECT on the tables.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import psycopg
from psycopg import sql
from psycopg.types.json import Json
from sqlglot import exp

from guard.backends.base import TableInfo
from guard.backends.derive import TEXT, check_maps, derived_sql
from guard.backends.derive import declaration as derivations
from guard.backends.duckdb_backend import file_snapshot
from guard.backends.postgres_connect import connect, first_line
from guard.backends.postgres_types import Connection, SourceTable, ordered, postgres_type
from guard.errors import BackendError, PolicyError
from guard.policy.model import Policy, Role, SourceKind, Table
from guard.sqlfiles import read_sql, statements

__all__ = ["REGISTRY", "Connection", "Snapshot", "Snapshotter", "first_line"]


REGISTRY = "_guard_tables"
#: layout of a snapshot built from a TABLE source; a new layout is a new data version
_TABLE_LAYOUT = "postgres snapshot 1"
#: versions of one table kept besides the newest, for guards still answering from them
_KEEP_OLD = 2
_COPY_CHUNK = 1 << 20
_SIGN_SHIFT = 1 << 63


@dataclass(frozen=True)
class Snapshot:
    """One protected table's snapshot: where it is and its public facts."""

    table: str
    #: the snapshot table's name in the guard's schema
    name: str
    info: TableInfo


@dataclass(frozen=True)
class _Wanted:
    table: Table
    version: str
    #: DuckDB snapshot file holding it (file sources), else None
    source_file: Path | None = None


class Snapshotter:
    """Finds, and if need be builds, the snapshot of every table of a policy."""

    def __init__(self, policy: Policy, schema: str, owner_dsn: str | None) -> None:
        self._policy = policy
        self._schema = schema
        self._owner_dsn = owner_dsn

    # -- entry point -----------------------------------------------------------------

    def ensure(self, reader: Connection, reader_role: str) -> dict[str, Snapshot]:
        """Name -> snapshot of every declared table; builds what is missing.

        ``reader`` is the query role's connection, used when no owner is configured.
        Raises PolicyError when a snapshot is missing and no owner role may build it.
        """
        owner = self._connect_owner() if self._owner_dsn else None
        try:
            con = owner or reader
            wanted = self._versions(con)
            found = self._registered(con, wanted)
            missing = [w for w in wanted if w.table.name not in found]
            if missing:
                if owner is None:
                    first = missing[0]
                    raise PolicyError(
                        f"{self._policy.path.name}: backend.owner_dsn: the snapshot of table "
                        f"{first.table.name} (data version {first.version[:12]}) is not in schema "
                        f"{self._schema} yet; add backend.owner_dsn, a role that may create tables there"
                    )
                found.update(self._build(owner, missing))
            if owner is not None:
                self._grant(owner, reader_role, [s.name for s in found.values()])
        finally:
            if owner is not None:
                owner.close()
        return {w.table.name.lower(): found[w.table.name] for w in wanted}

    # -- versions --------------------------------------------------------------------

    def _versions(self, con: Connection) -> list[_Wanted]:
        files = tuple(t for t in self._policy.tables if t.source.kind is not SourceKind.TABLE)
        wanted: dict[str, _Wanted] = {}
        if files:
            path = file_snapshot(self._policy, files)
            infos = _duckdb_infos(path)
            for table in files:
                wanted[table.name] = _Wanted(table, infos[table.name].data_version, path)
        key = "backend.owner_dsn" if self._owner_dsn else "backend.dsn"
        for table in self._policy.tables:
            if table.source.kind is SourceKind.TABLE:
                wanted[table.name] = _Wanted(table, self._table_version(con, table, key))
        return [wanted[t.name] for t in self._policy.tables]

    def _table_version(self, con: Connection, table: Table, key: str) -> str:
        """Declaration + content fingerprint of a TABLE source (one scan of the table)."""
        source = SourceTable.resolve(self._policy, con, table)
        wanted = [c for c in table.stored if c.role is not Role.IDENTIFIER or c.name == table.privacy_unit]
        row_text = sql.SQL(", ").join(source.column(self._policy, table, c.name) for c in wanted)
        query = sql.SQL(
            "SELECT count(*), coalesce(sum(hashtextextended(ROW({})::text, 0)::numeric), 0)::text FROM {}"
        ).format(row_text, source.relation)
        with _failures(self._policy, table, key):
            row = con.execute(query).fetchone()
        assert row is not None
        rows, fingerprint = row
        declaration: list[object] = [_TABLE_LAYOUT, table.name, table.privacy_unit, table.source.kind.value]
        declaration += [table.source.table, *([c.name, c.role.value] for c in table.stored)]
        declaration += [source.types[c.name.lower()] for c in wanted]
        declaration += derivations(table)
        digest = hashlib.sha256(json.dumps(declaration).encode())
        digest.update(f"{rows}:{fingerprint}".encode())
        return digest.hexdigest()

    # -- registry --------------------------------------------------------------------

    def _registered(self, con: Connection, wanted: list[_Wanted]) -> dict[str, Snapshot]:
        try:
            return self._lookup(con, wanted)
        except psycopg.errors.InsufficientPrivilege:
            raise PolicyError(
                f"{self._policy.path.name}: backend.owner_dsn: the query role may not read the "
                f"snapshots in schema {self._schema}; add backend.owner_dsn so the guard can grant it"
            ) from None
        except psycopg.Error as exc:
            raise BackendError(
                f"{self._policy.path.name}: backend: cannot read the snapshots: {first_line(exc)}"
            ) from None

    def _lookup(self, con: Connection, wanted: list[_Wanted]) -> dict[str, Snapshot]:
        registry = sql.Identifier(self._schema, REGISTRY)
        exists = con.execute("SELECT to_regclass(%s) IS NOT NULL", [registry.as_string(con)]).fetchone()
        if not exists or not exists[0]:
            return {}
        query = sql.SQL(
            "SELECT snapshot, info, to_regclass(format('%%I.%%I', %s::text, snapshot)) IS NOT NULL "
            "FROM {} WHERE name = %s AND data_version = %s"
        ).format(registry)
        found = {}
        for w in wanted:
            row = con.execute(query, [self._schema, w.table.name, w.version]).fetchone()
            if row is not None and row[2]:
                found[w.table.name] = Snapshot(w.table.name, row[0], _info(w.table.name, row[1]))
        return found

    # -- building --------------------------------------------------------------------

    def _build(self, owner: Connection, missing: list[_Wanted]) -> dict[str, Snapshot]:
        """Build ``missing`` under a session lock, so two guards never build one twice."""
        key = int.from_bytes(
            hashlib.sha256(f"statguard {self._schema}".encode()).digest()[:8], "big", signed=True
        )
        owner.execute("SELECT pg_advisory_lock(%s)", [key])
        try:
            built = {}
            for w in missing:
                with _failures(self._policy, w.table, "backend.owner_dsn"), owner.transaction():
                    # the fingerprint of a TABLE source and its rows come from one MVCC snapshot
                    owner.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    # the snapshot sorts the whole table twice: in memory where it fits
                    owner.execute("SET LOCAL work_mem = '128MB'")
                    self._create_schema(owner)
                    registry = sql.Identifier(self._schema, REGISTRY).as_string(owner)
                    for statement in statements(read_sql("postgres_registry.sql")):
                        owner.execute(statement.format(registry=registry))
                    if w.source_file is None:
                        # the data may have changed since the version was computed
                        w = _Wanted(w.table, self._table_version(owner, w.table, "backend.owner_dsn"))
                    # another guard may have built it while this one waited for the lock
                    again = self._lookup(owner, [w])
                    if w.table.name in again:
                        built.update(again)
                        continue
                    if w.source_file is not None:
                        snapshot = self._copy_file(owner, w)
                    else:
                        snapshot = self._copy_table(owner, w)
                    self._register(owner, w, snapshot)
                    built[w.table.name] = snapshot
        finally:
            # a broken connection has released its session lock already
            with contextlib.suppress(psycopg.Error):
                owner.execute("SELECT pg_advisory_unlock(%s)", [key])
        return built

    def _create_schema(self, owner: Connection) -> None:
        # CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when the schema
        # exists; an owner that was given only the schema must not need it
        row = owner.execute(
            "SELECT to_regnamespace(%s) IS NULL", [sql.Identifier(self._schema).as_string(owner)]
        )
        missing = row.fetchone()
        if missing is not None and missing[0]:
            owner.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self._schema)))

    def _relation(self, w: _Wanted) -> tuple[str, sql.Identifier]:
        name = f"{w.table.name.lower()[:40]}_{w.version[:12]}"
        return name, sql.Identifier(self._schema, name)

    def _copy_file(self, owner: Connection, w: _Wanted) -> Snapshot:
        """Stream one table of the DuckDB file snapshot into PostgreSQL with COPY."""
        assert w.source_file is not None
        name, relation = self._relation(w)
        source = duckdb.connect(str(w.source_file), read_only=True)
        export = w.source_file.with_suffix(f".{os.getpid()}.{w.table.name}.csv")
        try:
            described = source.execute(f"DESCRIBE {_duck_ident(w.table.name)}").fetchall()
            columns = [(row[0], row[1]) for row in described if row[0] not in ("_rid", "_uid", "_ukey")]
            definitions: list[sql.Composable] = [
                sql.SQL("_rid bigint NOT NULL, _uid bigint NOT NULL, _ukey bigint NOT NULL")
            ]
            definitions += [
                sql.SQL("{} {}").format(
                    sql.Identifier(c), sql.SQL(postgres_type(self._policy, w.table, c, t))
                )
                for c, t in columns
            ]
            owner.execute(sql.SQL("CREATE TABLE {} ({})").format(relation, sql.SQL(", ").join(definitions)))
            # _ukey is a DuckDB UBIGINT; shifting by 2^63 maps it onto BIGINT one-to-one
            selected = ", ".join(_duck_ident(c) for c, _ in columns)
            source.execute(
                f"COPY (SELECT _rid, _uid, (_ukey::HUGEINT - {_SIGN_SHIFT})::BIGINT, {selected} "
                f"FROM {_duck_ident(w.table.name)} ORDER BY _rid) "
                f"TO {_duck_literal(str(export))} (HEADER false)"
            )
            copy_sql = sql.SQL("COPY {} FROM STDIN (FORMAT csv)").format(relation)
            with owner.cursor().copy(copy_sql) as copy, export.open("rb") as handle:
                while chunk := handle.read(_COPY_CHUNK):
                    copy.write(chunk)
        except duckdb.Error as exc:
            raise PolicyError(
                f"{self._policy.path.name}: tables.{w.table.name}: cannot export the snapshot: "
                f"{str(exc).splitlines()[0]}"
            ) from None
        finally:
            source.close()
            export.unlink(missing_ok=True)
        owner.execute(sql.SQL("ANALYZE {}").format(relation))
        info = _duckdb_infos(w.source_file)[w.table.name]
        return Snapshot(w.table.name, name, info)

    def _copy_table(self, owner: Connection, w: _Wanted) -> Snapshot:
        table = w.table
        source = SourceTable.resolve(self._policy, owner, table)
        published = [c for c in table.stored if c.role is not Role.IDENTIFIER]
        casts, order, types = [], [], {}
        for column in published:
            guard_type, target = source.target(self._policy, table, column.name, column.role)
            types[column.name.lower()] = guard_type
            ident = sql.Identifier(column.name)
            casts.append(
                sql.SQL("{}::{} AS {}").format(
                    source.column(self._policy, table, column.name), sql.SQL(target), ident
                )
            )
            order.append(ordered(sql.SQL("s.{}").format(ident), target))
        derived = [sql.SQL(p) for p in derived_sql(self._policy, table, types, "postgres", "s")]
        types.update({c.name.lower(): TEXT for c in table.derived})
        unit_target = source.target(self._policy, table, table.privacy_unit, Role.IDENTIFIER)[1]
        unit_order = ordered(sql.SQL("s._unit"), unit_target)
        name, relation = self._relation(w)
        names = {
            "snapshot": relation.as_string(owner),
            "source": source.relation.as_string(owner),
            "unit": source.column(self._policy, table, table.privacy_unit).as_string(owner),
            "casts": sql.SQL(", ").join(casts).as_string(owner),
            "columns": sql.SQL(", ")
            .join([*(sql.SQL("s.{}").format(sql.Identifier(c.name)) for c in published), *derived])
            .as_string(owner),
            "order": sql.SQL(", ").join([*order, unit_order]).as_string(owner),
            "unit_order": unit_order.as_string(owner),
        }
        for statement in statements(read_sql("postgres_table.sql")):
            owner.execute(statement.format(**names))
        built = exp.table_(name, db=self._schema, quoted=True)
        check_maps(self._policy, table, built, "postgres", lambda query: owner.execute(query).fetchall())
        counted = [*published, *table.derived]
        counts = sql.SQL(", ").join(
            sql.SQL("count(DISTINCT _uid) FILTER (WHERE {} IS NOT NULL)").format(sql.Identifier(c.name))
            for c in counted
        )
        row = owner.execute(
            sql.SQL("SELECT count(*), count(DISTINCT _uid), {} FROM {}").format(counts, relation)
        ).fetchone()
        assert row is not None
        rows, units, *per_column = row
        info = TableInfo(
            name=table.name,
            types=types,
            rows=rows,
            units=units,
            units_with_value={c.name.lower(): n for c, n in zip(counted, per_column, strict=True)},
            one_row_per_unit=rows == units,
            data_version=w.version,
        )
        return Snapshot(table.name, name, info)

    def _register(self, owner: Connection, w: _Wanted, snapshot: Snapshot) -> None:
        registry = sql.Identifier(self._schema, REGISTRY)
        info = snapshot.info
        document = {
            "types": dict(info.types),
            "rows": info.rows,
            "units": info.units,
            "units_with_value": dict(info.units_with_value),
            "one_row_per_unit": info.one_row_per_unit,
            "data_version": info.data_version,
        }
        owner.execute(
            sql.SQL("INSERT INTO {} (name, data_version, snapshot, info) VALUES (%s, %s, %s, %s)").format(
                registry
            ),
            [w.table.name, w.version, snapshot.name, Json(document)],
        )
        # older versions go, but not at once: a guard opened before the change may
        # still be answering from the previous one
        stale = owner.execute(
            sql.SQL("SELECT snapshot FROM {} WHERE name = %s ORDER BY built_at DESC OFFSET %s").format(
                registry
            ),
            [w.table.name, _KEEP_OLD + 1],
        ).fetchall()
        for (old,) in stale:
            owner.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(self._schema, old)))
            owner.execute(
                sql.SQL("DELETE FROM {} WHERE name = %s AND snapshot = %s").format(registry),
                [w.table.name, old],
            )

    def _grant(self, owner: Connection, role: str, names: list[str]) -> None:
        """Let the query role read the snapshots; nothing is written when it already may."""
        relations = [sql.Identifier(self._schema, n).as_string(owner) for n in (REGISTRY, *names)]
        row = owner.execute(
            "SELECT has_schema_privilege(%s, %s, 'USAGE') "
            "AND bool_and(has_table_privilege(%s, relation, 'SELECT')) FROM unnest(%s::text[]) AS relation",
            [role, self._schema, role, relations],
        ).fetchone()
        if row is not None and row[0]:
            return
        grantee = sql.Identifier(role)
        with _failures(self._policy, None, "backend.owner_dsn"), owner.transaction():
            owner.execute(
                sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(self._schema), grantee)
            )
            targets = [sql.Identifier(self._schema, n) for n in (REGISTRY, *names)]
            owner.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(sql.SQL(", ").join(targets), grantee))

    def _connect_owner(self) -> Connection:
        assert self._owner_dsn is not None
        return connect(self._owner_dsn, self._policy, "backend.owner_dsn")


def _duckdb_infos(path: Path) -> dict[str, TableInfo]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        rows = con.execute("SELECT name, info FROM _guard_tables").fetchall()
    finally:
        con.close()
    return {name: _info(name, json.loads(info)) for name, info in rows}


def _info(name: str, data: dict[str, Any]) -> TableInfo:
    return TableInfo.from_document(name, data)


@contextlib.contextmanager
def _failures(policy: Policy, table: Table | None, key: str) -> Iterator[None]:
    """Engine failures while snapshotting; a missing privilege names the role's key."""
    try:
        yield
    except psycopg.errors.InsufficientPrivilege as exc:
        what = f"table {table.name}" if table is not None else "the snapshots"
        raise PolicyError(
            f"{policy.path.name}: {key}: its role lacks a privilege to snapshot {what} "
            f"({first_line(exc)}): grant it SELECT on the source and CREATE on the guard's schema"
        ) from None
    except psycopg.Error as exc:
        where = f"tables.{table.name}" if table is not None else "backend"
        raise BackendError(f"{policy.path.name}: {where}: the snapshot failed: {first_line(exc)}") from None


def _duck_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _duck_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
