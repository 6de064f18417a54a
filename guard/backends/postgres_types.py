"""PostgreSQL types and TABLE sources, as the guard's snapshots see them.

The guard speaks DuckDB's type names (``TableInfo.types``, ``NUMERIC_TYPES``): a file
snapshot's DuckDB columns become PostgreSQL columns by ``postgres_type``, and a table
already in PostgreSQL is described in DuckDB's names by ``SourceTable.target``, which
also picks the type its snapshot column gets.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from guard.engines import NUMERIC_TYPES, POSTGRES_TYPES
from guard.errors import PolicyError
from guard.policy.model import Policy, Role, Table

__all__ = ["Connection", "SourceTable", "ordered", "postgres_type"]

Connection = psycopg.Connection[tuple[Any, ...]]

#: DuckDB type (of a file snapshot's column) -> PostgreSQL column type: the loadable ones
_FROM_DUCKDB = {name: t.column for name, t in POSTGRES_TYPES.items() if t.column is not None}

#: PostgreSQL type (format_type) -> (guard's DuckDB type name, snapshot column type)
_FROM_POSTGRES = {
    "boolean": ("BOOLEAN", "boolean"),
    "smallint": ("SMALLINT", "smallint"),
    "integer": ("INTEGER", "integer"),
    "bigint": ("BIGINT", "bigint"),
    "real": ("FLOAT", "real"),
    "double precision": ("DOUBLE", "double precision"),
    "date": ("DATE", "date"),
    "text": ("VARCHAR", "text"),
    "name": ("VARCHAR", "text"),
    "citext": ("VARCHAR", "text"),
}
_PATTERNS = (
    (re.compile(r"character varying(\(\d+\))?|character(\(\d+\))?|\"char\""), ("VARCHAR", "text")),
    (re.compile(r"timestamp(\(\d\))? without time zone"), ("TIMESTAMP", "timestamp")),
    (re.compile(r"timestamp(\(\d\))? with time zone"), ("TIMESTAMP WITH TIME ZONE", "timestamptz")),
    (re.compile(r"time(\(\d\))? without time zone"), ("TIME", "time")),
)
_NUMERIC = re.compile(r"numeric\((\d+),(-?\d+)\)")
_TEXT_TYPES = ("text",)


@dataclass(frozen=True)
class SourceTable:
    """A TABLE source as found in the catalog: its relation and its columns' types."""

    relation: sql.Identifier
    #: lower-cased column name -> (name in the source, format_type)
    columns: dict[str, tuple[str, str]]

    @property
    def types(self) -> dict[str, str]:
        return {k: v[1] for k, v in self.columns.items()}

    @classmethod
    def resolve(cls, policy: Policy, con: Connection, table: Table) -> SourceTable:
        text = table.source.table or table.name
        parts = text.split(".")
        if len(parts) == 3:
            # catalog.schema.table: the catalog is a database, and only this one is reachable
            current = con.execute("SELECT current_database()").fetchone()
            if current is None or parts[0].lower() != str(current[0]).lower():
                raise PolicyError(
                    f"{policy.path.name}: tables.{table.name}.source.table: {parts[0]} is not the database "
                    "backend.dsn connects to; name the table as schema.table in that database"
                )
            text = ".".join(parts[1:])
        found = con.execute(
            "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.oid = to_regclass(%s)",
            [text],
        ).fetchone()
        if found is None:
            raise PolicyError(
                f"{policy.path.name}: tables.{table.name}.source.table: no table {text} visible to the "
                "role of backend.owner_dsn (or backend.dsn); create it or fix the name"
            )
        rows = con.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            [text],
        ).fetchall()
        return cls(sql.Identifier(found[0], found[1]), {r[0].lower(): (r[0], r[1]) for r in rows})

    def column(self, policy: Policy, table: Table, name: str) -> sql.Identifier:
        if name.lower() not in self.columns:
            close = difflib.get_close_matches(name.lower(), list(self.columns), n=1)
            hint = f" (did you mean {self.columns[close[0]][0]!r}?)" if close else ""
            raise PolicyError(
                f"{policy.path.name}: tables.{table.name}.columns.{name}: not a column of the source "
                f"table {table.source.table}{hint}"
            )
        return sql.Identifier(self.columns[name.lower()][0])

    def target(self, policy: Policy, table: Table, name: str, role: Role) -> tuple[str, str]:
        """(guard type, snapshot type) of a column; a measure must be numeric."""
        self.column(policy, table, name)
        source_type = self.columns[name.lower()][1]
        mapped = _FROM_POSTGRES.get(source_type)
        if mapped is None:
            mapped = next((m for pattern, m in _PATTERNS if pattern.fullmatch(source_type)), None)
        if mapped is None and source_type.startswith("numeric"):
            match = _NUMERIC.fullmatch(source_type)
            if match and 0 <= int(match[2]) <= int(match[1]) <= 38:
                mapped = (f"DECIMAL({match[1]},{match[2]})", source_type)
            else:
                # beyond DECIMAL(38): the guard computes with doubles, as it would for a file
                mapped = ("DOUBLE", "double precision")
        if mapped is None:
            # any other type (enum, uuid, json, ...) is a label: compared and grouped as text
            mapped = ("VARCHAR", "text")
        if role is Role.MEASURE and mapped[0].split("(")[0] not in NUMERIC_TYPES:
            raise PolicyError(
                f"{policy.path.name}: tables.{table.name}.columns.{name}: a measure must be numeric, "
                f"the source has {source_type}"
            )
        return mapped


def ordered(expression: sql.Composable, target: str) -> sql.Composable:
    # byte order: the same on every server, whatever the database's collation
    if target in _TEXT_TYPES:
        return sql.SQL('{} COLLATE "C"').format(expression)
    return expression


def postgres_type(policy: Policy, table: Table, column: str, duck_type: str) -> str:
    decimal = re.fullmatch(r"DECIMAL\((\d+),(\d+)\)", duck_type)
    if decimal:
        return f"numeric({decimal[1]},{decimal[2]})"
    if duck_type in _FROM_DUCKDB:
        return _FROM_DUCKDB[duck_type]
    raise PolicyError(
        f"{policy.path.name}: tables.{table.name}.columns.{column}: the source type {duck_type} "
        "cannot be loaded into postgres; convert the column to text, a number, a date or a timestamp"
    )
