"""Data engines behind the guard: DuckDB (embedded default), PostgreSQL, Spark.

:data:`ENGINES` is the one table of engines: each :class:`Engine`'s name (as policies'
``backend:`` and the CLI's ``--backend`` spell it), the class that implements it, the
pip extra that installs its client library, and the option keys its ``backend:``
section accepts. The policy loader, the CLI and :func:`open_backend` all read it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType

from guard.backends.base import Backend
from guard.errors import BackendError
from guard.policy.model import Policy

__all__ = ["ENGINES", "ENGINE_NAMES", "Engine", "EngineEntry", "open_backend"]


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


def open_backend(policy: Policy) -> Backend:
    """The policy's engine (``backend:``), opened read-only with its snapshot built.

    Raises:
        PolicyError: the policy's tables cannot be loaded into that engine.
        BackendError: the engine is unknown or cannot be reached, or its client library
            is missing.
    """
    name = policy.backend.engine
    try:
        entry = ENGINES[Engine(name)]
    except ValueError:
        raise BackendError(f"unknown backend {name!r}; supported: {', '.join(ENGINE_NAMES)}") from None
    try:
        module = importlib.import_module(entry.module)
    except ImportError as exc:
        install = f"pip install 'statguard[{entry.extra}]'" if entry.extra else "reinstall statguard"
        raise BackendError(
            f"the {name} backend needs a library that is not installed ({exc.name}): {install}"
        ) from None
    backend: Backend = getattr(module, entry.cls)(policy)
    return backend
