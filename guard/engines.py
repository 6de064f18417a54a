"""The one table of engines, and the one table of DuckDB types as PostgreSQL names them.

:data:`ENGINES`: each :class:`Engine`'s name (as policies' ``backend:`` and the CLI's
``--backend`` spell it), the class that implements it, the pip extra that installs its
client library, and the option keys its ``backend:`` section accepts. The policy loader,
the CLI and :func:`guard.backends.open_backend` all read it.

:data:`POSTGRES_TYPES`: for each DuckDB type name the guard speaks (``TableInfo.types``),
the PostgreSQL column type a PostgreSQL snapshot gives it (None: such a column cannot be
snapshotted there) and the wire type the PostgreSQL endpoint sends it as. The snapshot
builder (``guard/backends/postgres_types.py``) and the endpoint
(``guard/server/pgwire/types.py``) both read it.

Nothing here imports the rest of the guard: every layer may read these tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType

__all__ = [
    "ENGINES",
    "ENGINE_NAMES",
    "NUMERIC_TYPES",
    "POSTGRES_TYPES",
    "Engine",
    "EngineEntry",
    "PostgresType",
]


class Engine(Enum):
    """The engines a policy may name; the value is the name."""

    DUCKDB = "duckdb"
    POSTGRES = "postgres"
    SPARK = "spark"


@dataclass(frozen=True)
class EngineEntry:
    """How to open one engine, and which ``backend:`` options it takes."""

    #: the module (imported only when the engine is opened) and its Backend subclass
    module: str
    cls: str
    #: ``pip install 'statguard[EXTRA]'`` installs the client library; None: always installed
    extra: str | None
    #: the option keys of ``backend: {engine: NAME, ...}``; policies/README.md documents each
    options: tuple[str, ...] = ()
    #: options that must be given
    required: tuple[str, ...] = ()
    #: groups of options of which at most one may be given
    exclusive: tuple[tuple[str, ...], ...] = ()


ENGINES: MappingProxyType[Engine, EngineEntry] = MappingProxyType(
    {
        Engine.DUCKDB: EngineEntry("guard.backends.duckdb_backend", "DuckDBBackend", extra=None),
        Engine.POSTGRES: EngineEntry(
            "guard.backends.postgres_backend",
            "PostgresBackend",
            extra="postgres",
            options=("dsn", "owner_dsn", "schema"),
            required=("dsn",),
        ),
        Engine.SPARK: EngineEntry(
            "guard.backends.spark_backend",
            "SparkBackend",
            extra="spark",
            # master: a local or cluster Spark; remote: a Spark Connect URL
            options=("master", "remote", "snapshot"),
            exclusive=(("master", "remote"),),
        ),
    }
)

#: the engines' names, in the table's order (the CLI's --backend choices)
ENGINE_NAMES: tuple[str, ...] = tuple(engine.value for engine in Engine)


#: the DuckDB type names (``TableInfo.types``, parameters stripped) of numbers: what a
#: measure must be, and what sums exactly
NUMERIC_TYPES = frozenset(
    {
        "TINYINT",
        "SMALLINT",
        "INTEGER",
        "BIGINT",
        "HUGEINT",
        "UTINYINT",
        "USMALLINT",
        "UINTEGER",
        "UBIGINT",
        "UHUGEINT",
        "FLOAT",
        "DOUBLE",
        "DECIMAL",
    }
)


@dataclass(frozen=True)
class PostgresType:
    """How PostgreSQL names one DuckDB type."""

    #: the column type of a PostgreSQL snapshot (exact precision: numeric(20,0) holds every
    #: UBIGINT); None: not loadable into a snapshot
    column: str | None
    #: the type the PostgreSQL endpoint sends values as (``pg_type.typname``)
    wire: str


# Unsigned and wider-than-64-bit integers become numeric: PostgreSQL has neither.
POSTGRES_TYPES: MappingProxyType[str, PostgresType] = MappingProxyType(
    {
        "VARCHAR": PostgresType("text", "text"),
        "BOOLEAN": PostgresType("boolean", "bool"),
        "TINYINT": PostgresType("smallint", "int2"),
        "SMALLINT": PostgresType("smallint", "int2"),
        "INTEGER": PostgresType("integer", "int4"),
        "BIGINT": PostgresType("bigint", "int8"),
        "UTINYINT": PostgresType("smallint", "int2"),
        "USMALLINT": PostgresType("integer", "int4"),
        "UINTEGER": PostgresType("bigint", "int8"),
        "UBIGINT": PostgresType("numeric(20,0)", "numeric"),
        "HUGEINT": PostgresType("numeric(38,0)", "numeric"),
        "UHUGEINT": PostgresType("numeric(39,0)", "numeric"),
        "BIGNUM": PostgresType(None, "numeric"),
        "VARINT": PostgresType(None, "numeric"),
        "DECIMAL": PostgresType(None, "numeric"),  # a snapshot column keeps its (p, s)
        "FLOAT": PostgresType("real", "float4"),
        "DOUBLE": PostgresType("double precision", "float8"),
        "DATE": PostgresType("date", "date"),
        "TIME": PostgresType("time", "time"),
        "TIMESTAMP": PostgresType("timestamp", "timestamp"),
        "TIMESTAMP_S": PostgresType("timestamp", "timestamp"),
        "TIMESTAMP_MS": PostgresType("timestamp", "timestamp"),
        "TIMESTAMP_NS": PostgresType("timestamp", "timestamp"),
        "TIMESTAMP WITH TIME ZONE": PostgresType("timestamptz", "timestamptz"),
        "JSON": PostgresType(None, "json"),
        "BLOB": PostgresType(None, "bytea"),
        "INTERVAL": PostgresType(None, "interval"),
        "UUID": PostgresType(None, "uuid"),
    }
)
