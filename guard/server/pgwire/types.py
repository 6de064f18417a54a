"""PostgreSQL data types the endpoint speaks, and how engine (DuckDB) types map onto them.

One table (:data:`PG_TYPES`) declares every type: its OID, name, length and the name
``format_type`` prints. The codecs (``values.py``), RowDescription and the emulated
``pg_type`` catalog all read it, so an OID is written down exactly once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from guard.engines import POSTGRES_TYPES

__all__ = [
    "PG_TYPES",
    "PgType",
    "by_name",
    "by_oid",
    "numeric_typmod",
    "pg_type_of_engine",
]


@dataclass(frozen=True)
class PgType:
    oid: int
    #: ``pg_type.typname``
    name: str
    #: ``pg_type.typlen``: bytes of a fixed-size value, -1 variable, -2 C string
    length: int
    #: what ``format_type`` and ``\d`` print
    sql_name: str
    #: ``pg_type.typcategory`` (N numeric, S string, D date/time, B boolean, A array, U user)
    category: str
    #: OID of the array type of this type (0: none)
    array_oid: int = 0
    #: for an array type: OID of its element type
    element_oid: int = 0
    #: ``typinput`` (JDBC tells arrays from scalars by ``array_in``)
    input_function: str = ""


def _scalar(oid: int, name: str, length: int, sql_name: str, category: str, array_oid: int) -> PgType:
    return PgType(oid, name, length, sql_name, category, array_oid, 0, f"{name}in")


def _array(oid: int, element: PgType) -> PgType:
    return PgType(oid, f"_{element.name}", -1, f"{element.sql_name}[]", "A", 0, element.oid, "array_in")


_SCALARS = (
    _scalar(16, "bool", 1, "boolean", "B", 1000),
    _scalar(17, "bytea", -1, "bytea", "U", 1001),
    _scalar(18, "char", 1, '"char"', "Z", 1002),
    _scalar(19, "name", 64, "name", "S", 1003),
    _scalar(20, "int8", 8, "bigint", "N", 1016),
    _scalar(21, "int2", 2, "smallint", "N", 1005),
    _scalar(22, "int2vector", -1, "int2vector", "A", 1006),
    _scalar(23, "int4", 4, "integer", "N", 1007),
    _scalar(24, "regproc", 4, "regproc", "N", 1008),
    _scalar(25, "text", -1, "text", "S", 1009),
    _scalar(26, "oid", 4, "oid", "N", 1028),
    _scalar(114, "json", -1, "json", "U", 199),
    _scalar(700, "float4", 4, "real", "N", 1021),
    _scalar(701, "float8", 8, "double precision", "N", 1022),
    _scalar(705, "unknown", -2, "unknown", "X", 0),
    _scalar(1042, "bpchar", -1, "character", "S", 1014),
    _scalar(1043, "varchar", -1, "character varying", "S", 1015),
    _scalar(1082, "date", 4, "date", "D", 1182),
    _scalar(1083, "time", 8, "time without time zone", "D", 1183),
    _scalar(1114, "timestamp", 8, "timestamp without time zone", "D", 1115),
    _scalar(1184, "timestamptz", 8, "timestamp with time zone", "D", 1185),
    _scalar(1186, "interval", 16, "interval", "T", 1187),
    _scalar(1700, "numeric", -1, "numeric", "N", 1231),
    _scalar(2205, "regclass", 4, "regclass", "N", 2210),
    _scalar(2206, "regtype", 4, "regtype", "N", 2211),
    _scalar(2950, "uuid", 16, "uuid", "U", 2951),
    _scalar(3802, "jsonb", -1, "jsonb", "U", 3807),
)

#: every type the endpoint knows, scalars and their arrays
PG_TYPES: tuple[PgType, ...] = _SCALARS + tuple(_array(t.array_oid, t) for t in _SCALARS if t.array_oid)

_BY_OID = {t.oid: t for t in PG_TYPES}
_BY_NAME = {t.name: t for t in PG_TYPES}


def by_oid(oid: int) -> PgType | None:
    return _BY_OID.get(oid)


def by_name(name: str) -> PgType:
    """The type called ``name`` (``pg_type.typname``); KeyError for a name not in the table."""
    return _BY_NAME[name]


# Engine type name (without parameters) -> the PostgreSQL type it is sent as (the one table)
_ENGINE_TYPES: dict[str, str] = {name: t.wire for name, t in POSTGRES_TYPES.items()}

_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")


def pg_type_of_engine(engine_type: str) -> PgType:
    """The PostgreSQL type a DuckDB type name is sent as (text for anything unusual:
    structs, maps and enums arrive as their text form)."""
    name = engine_type.strip().upper()
    if name.endswith("[]"):
        element = pg_type_of_engine(name[:-2])
        return _BY_OID.get(element.array_oid, _BY_NAME["text"])
    base = name.split("(", 1)[0].strip()
    return _BY_NAME[_ENGINE_TYPES.get(base, "text")]


def numeric_typmod(engine_type: str) -> int:
    """``atttypmod`` of a DECIMAL(p, s) column (-1 for any other type), as PostgreSQL
    encodes it: ((p << 16) | s) + 4."""
    match = _DECIMAL.fullmatch(engine_type.strip().upper())
    if match is None:
        return -1
    precision, scale = int(match.group(1)), int(match.group(2))
    return ((precision << 16) | scale) + 4
