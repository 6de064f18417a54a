"""Spark snapshots: each protected table as Parquet, one folder per data version.

File sources (CSV, Parquet, DuckDB) go through the canonical DuckDB loader
(:func:`~guard.backends.duckdb_backend.file_snapshot`), so a CSV's types and the
guard's ``_rid``/``_uid``/``_ukey`` are the same whichever engine answers; its tables
are exported to Parquet once per version. TABLE sources (a table Spark already has) are
snapshotted inside Spark, with the same columns computed by window functions.

Layout under the snapshot folder (``backend.snapshot``, default ``STATE/snapshots/spark``)::

    <policy>/files-<version>/<table>.parquet     every file-sourced table of one version
    <policy>/table-<table>-<version>/            one TABLE source, written by Spark

An export is written to a hidden ``.partial`` sibling and renamed into place, so a
half-written export is never read. The folder must be visible under the same path to
the guard and to Spark (the same machine in local mode; shared storage with Connect).
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from sqlglot import exp

from guard.backends.base import TableInfo
from guard.backends.derive import check_maps, derived_sql
from guard.backends.derive import declaration as derivations
from guard.backends.duckdb_backend import file_snapshot
from guard.engines import NUMERIC_TYPES
from guard.errors import PolicyError
from guard.policy.model import Policy, Role, Table

__all__ = ["Snapshot", "export_files", "snapshot_folder", "snapshot_table", "spark_type"]

#: the layout of an in-engine snapshot; a new layout is a new data version
_LAYOUT = "spark snapshot 1"
#: DuckDB's _ukey is UBIGINT; Spark has no unsigned type, so it is shifted into BIGINT
#: (an injective map, so distinct units keep distinct keys)
_UKEY_SHIFT = 1 << 63
#: exports kept per table besides the current one: a guard still open on the previous
#: data version keeps reading its files (Spark opens them at query time, not at open)
_KEEP_PREVIOUS = 1

#: Spark's simple type names -> the guard's (DuckDB's) type vocabulary
_TYPES = {
    "string": "VARCHAR",
    "bigint": "BIGINT",
    "int": "INTEGER",
    "smallint": "SMALLINT",
    "tinyint": "TINYINT",
    "double": "DOUBLE",
    "float": "FLOAT",
    "boolean": "BOOLEAN",
    "date": "DATE",
    "timestamp_ntz": "TIMESTAMP",
    "timestamp": "TIMESTAMP WITH TIME ZONE",
}


@dataclass(frozen=True)
class Snapshot:
    """One protected table's snapshot: its Parquet path (a file or a folder) and facts."""

    table: str
    path: Path
    info: TableInfo


def snapshot_folder(policy: Policy) -> Path:
    """``backend.snapshot`` (relative to the policy file), else ``STATE/snapshots/spark``."""
    option = policy.backend.options.get("snapshot")
    if option is None:
        return policy.state_dir / "snapshots" / "spark"
    return (policy.path.parent / option).resolve()


def spark_type(simple: str) -> str | None:
    """A Spark type (``simpleString()``) in the guard's vocabulary; None: unsupported."""
    if simple.startswith("decimal("):
        return simple.upper()
    if simple.startswith(("varchar(", "char(")):
        return "VARCHAR"
    return _TYPES.get(simple)


def _ident(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql(dialect="duckdb")


def _column(name: str) -> Any:
    """A Spark column by its exact name (backticks: a dot is part of the name)."""
    return F.col("`" + name.replace("`", "``") + "`")


def _published(table: Table) -> list[str]:
    return [c.name for c in table.columns if c.role is not Role.IDENTIFIER]


# ---------------------------------------------------------------------------- file sources


def export_files(policy: Policy, tables: tuple[Table, ...], folder: Path) -> list[Snapshot]:
    """The file-sourced ``tables`` as Parquet files, exported from the DuckDB snapshot.

    Raises:
        PolicyError: a source cannot be read (from the DuckDB loader), or the export fails.
    """
    database = file_snapshot(policy, tables)
    # the DuckDB file is named <policy>-<version>: its version names the export too
    version = database.stem.rsplit("-", 1)[-1]
    parent = folder / policy.name
    target = parent / f"files-{version}"
    try:
        con = duckdb.connect(str(database), read_only=True)
    except duckdb.Error as exc:
        raise PolicyError(
            f"{policy.path.name}: cannot open the data snapshot {database.name}: {exc}"
        ) from None
    try:
        infos = _duckdb_infos(con)
        if not target.is_dir():
            _export(con, policy, tables, target)
    finally:
        con.close()
    _prune(parent, "files-*", target)
    return [Snapshot(t.name, target / f"{t.name.lower()}.parquet", infos[t.name.lower()]) for t in tables]


def _duckdb_infos(con: duckdb.DuckDBPyConnection) -> dict[str, TableInfo]:
    infos = {}
    for name, text in con.execute("SELECT name, info FROM _guard_tables").fetchall():
        infos[name.lower()] = TableInfo.from_document(name, json.loads(text))
    return infos


def _export(con: duckdb.DuckDBPyConnection, policy: Policy, tables: tuple[Table, ...], target: Path) -> None:
    partial = _partial(target)
    partial.mkdir(parents=True)
    try:
        for table in tables:
            columns = ", ".join(_ident(c) for c in _published(table))
            # HUGEINT first: UBIGINT minus 2^63 would underflow in BIGINT arithmetic
            ukey = f"CAST(CAST(_ukey AS HUGEINT) - {_UKEY_SHIFT} AS BIGINT) AS _ukey"
            path = exp.Literal.string(str(partial / f"{table.name.lower()}.parquet")).sql(dialect="duckdb")
            con.execute(
                f"COPY (SELECT _rid, _uid, {ukey}, {columns} FROM {_ident(table.name)} ORDER BY _rid) "
                f"TO {path} (FORMAT parquet)"
            )
    except duckdb.Error as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise PolicyError(
            f"{policy.path.name}: cannot export the data snapshot to Parquet for Spark: "
            f"{str(exc).splitlines()[0]}; check backend.snapshot"
        ) from None
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    _publish(partial, target)


# --------------------------------------------------------------------------- TABLE sources


def snapshot_table(spark: SparkSession, policy: Policy, table: Table, folder: Path) -> Snapshot:
    """A TABLE source snapshotted inside Spark: ``_rid``, ``_uid``, ``_ukey`` and the
    declared dimensions and measures, without identifiers (nor the unit itself).

    ``_rid`` numbers rows in the order of all their published values and unit (so it
    is the same on every rebuild of the same data), ``_uid`` numbers units in their
    order, ``_ukey`` is xxhash64 of the unit. Rows without a unit are dropped.

    Raises:
        PolicyError: the table is missing, lacks a declared column, or has a type the
            guard cannot protect.
        PySparkException: Spark failed while building (the caller reports it).
    """
    where = f"{policy.path.name}: tables.{table.name}"
    try:
        source = spark.table(table.source.table or table.name)
        fields = {f.name.lower(): f for f in source.schema.fields}
    except PySparkException:
        raise PolicyError(
            f"{where}.source: Spark has no table {table.source.table!r}: name an existing table "
            "as [catalog.][schema.]table"
        ) from None
    published = [c.name for c in table.stored if c.role is not Role.IDENTIFIER]
    declared_types = []
    guard_types = {}
    for name in (table.privacy_unit, *published):
        found = fields.get(name.lower())
        if found is None:
            close = difflib.get_close_matches(name.lower(), list(fields), n=1)
            hint = f" (did you mean {fields[close[0]].name!r}?)" if close else ""
            raise PolicyError(
                f"{where}.columns.{name}: not a column of the Spark table {table.source.table}{hint}"
            )
        simple = found.dataType.simpleString()
        guard_type = spark_type(simple)
        if name != table.privacy_unit and guard_type is None:
            raise PolicyError(
                f"{where}.columns.{name}: the Spark type {simple} cannot be protected; declare a column "
                "of a number, string, boolean, date or timestamp type"
            )
        column = table.column(name)
        if (
            column is not None
            and column.role is Role.MEASURE
            and (guard_type or "").split("(")[0] not in NUMERIC_TYPES
        ):
            raise PolicyError(f"{where}.columns.{name}: a measure must be numeric, the source has {simple}")
        declared_types.append(simple)
        guard_types[name.lower()] = guard_type or simple
    staged = source.select(
        _column(fields[table.privacy_unit.lower()].name).alias("_unit"),
        *(_column(fields[name.lower()].name).alias(name) for name in published),
    ).where(F.col("_unit").isNotNull())
    version = _table_version(table, staged, published, declared_types)
    derived = [F.expr(p) for p in derived_sql(policy, table, guard_types, "spark")]
    parent = folder / policy.name
    target = parent / f"table-{table.name.lower()}-{version[:16]}"
    if not target.is_dir():
        _write_table(staged, published, derived, target)
        _check_derived(spark, policy, table, target)
    _prune(parent, f"table-{table.name.lower()}-*", target)
    return Snapshot(table.name, target, _table_info(spark, table, target, version))


def _table_version(table: Table, staged: DataFrame, published: list[str], types: list[str]) -> str:
    """The declaration's digest and an in-engine fingerprint of the content: its row
    count and the sum of a hash of every row (order-free, computed in one scan)."""
    declaration: list[object] = [_LAYOUT, table.name, table.privacy_unit, table.source.kind.value]
    declaration += [table.source.table, types, *([c.name, c.role.value] for c in table.stored)]
    declaration += derivations(table)
    # xxhash64 skips NULL arguments, so each value travels with its own NULL flag: a
    # value moving to the neighbouring column must change the hash
    parts = [part for name in ("_unit", *published) for part in (F.col(name), F.isnull(F.col(name)))]
    row = staged.agg(
        F.count(F.lit(1)),
        # DECIMAL(38, 0): a sum of 64-bit hashes overflows BIGINT (an error in ANSI mode)
        F.sum(F.xxhash64(*parts).cast("decimal(38,0)")),
    ).first()
    assert row is not None
    digest = hashlib.sha256(json.dumps(declaration).encode())
    digest.update(f"{row[0]}:{row[1]}".encode())
    return digest.hexdigest()


def _write_table(staged: DataFrame, published: list[str], derived: list[Any], target: Path) -> None:
    every_value = [F.col(name).asc_nulls_first() for name in (*published, "_unit")]
    built = staged.select(
        (F.row_number().over(Window.orderBy(*every_value)) - 1).cast("bigint").alias("_rid"),
        (F.dense_rank().over(Window.orderBy("_unit")) - 1).cast("bigint").alias("_uid"),
        F.xxhash64("_unit").alias("_ukey"),
        *published,
        *derived,
    )
    partial = _partial(target)
    try:
        built.orderBy("_rid").write.parquet(str(partial))
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    _publish(partial, target)


def _check_derived(spark: SparkSession, policy: Policy, table: Table, path: Path) -> None:
    """A map without ``other`` must cover every value of its source; a snapshot that
    fails the check is removed, so the next open checks again."""
    view = f"_guard_check_{uuid.uuid4().hex[:12]}"
    spark.read.parquet(str(path)).createOrReplaceTempView(view)
    try:
        check_maps(policy, table, exp.to_table(view, quoted=True), "spark", lambda q: spark.sql(q).collect())
    except PolicyError:
        shutil.rmtree(path, ignore_errors=True)
        raise
    finally:
        spark.catalog.dropTempView(view)


def _table_info(spark: SparkSession, table: Table, path: Path, version: str) -> TableInfo:
    frame = spark.read.parquet(str(path))
    published = _published(table)
    row = frame.agg(
        F.count(F.lit(1)),
        F.count_distinct(F.col("_uid")),
        *(F.count_distinct(F.when(F.col(name).isNotNull(), F.col("_uid"))) for name in published),
    ).first()
    assert row is not None
    rows, units, *per_column = row
    simple = {f.name.lower(): f.dataType.simpleString() for f in frame.schema.fields}
    return TableInfo(
        name=table.name,
        types={name.lower(): spark_type(simple[name.lower()]) or simple[name.lower()] for name in published},
        rows=rows,
        units=units,
        units_with_value={name.lower(): n for name, n in zip(published, per_column, strict=True)},
        one_row_per_unit=rows == units,
        data_version=version,
    )


# ------------------------------------------------------------------------------ the folder


def _partial(target: Path) -> Path:
    return target.parent / f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.partial"


def _publish(partial: Path, target: Path) -> None:
    """Rename a finished export into place; another process may have won the race."""
    try:
        os.replace(partial, target)
    except OSError:
        if not target.is_dir():
            raise
        shutil.rmtree(partial, ignore_errors=True)


def _prune(parent: Path, pattern: str, current: Path) -> None:
    """Delete stale exports, newest first kept (see _KEEP_PREVIOUS)."""
    with contextlib.suppress(OSError):
        others = sorted(
            (p for p in parent.glob(pattern) if p != current), key=lambda p: p.stat().st_mtime, reverse=True
        )
        for old in others[_KEEP_PREVIOUS:]:
            shutil.rmtree(old, ignore_errors=True)
