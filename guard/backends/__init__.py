"""Data engines behind the guard: DuckDB (embedded default), PostgreSQL, Spark."""

from __future__ import annotations

from guard.backends.base import Backend
from guard.errors import BackendError
from guard.policy.model import Policy

__all__ = ["open_backend"]

#: engine -> (module, class, pip extra)
_ENGINES = {
    "duckdb": ("guard.backends.duckdb_backend", "DuckDBBackend", None),
    "postgres": ("guard.backends.postgres_backend", "PostgresBackend", "postgres"),
    "spark": ("guard.backends.spark_backend", "SparkBackend", "spark"),
}


def open_backend(policy: Policy) -> Backend:
    """The policy's engine (``backend:``), opened read-only with its snapshot built.

    Raises:
        PolicyError: the policy's tables cannot be loaded into that engine.
        BackendError: the engine cannot be reached, or its client library is missing.
    """
    import importlib

    module_name, class_name, extra = _ENGINES[policy.backend.engine]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendError(
            f"the {policy.backend.engine} backend needs a library that is not installed "
            f"({exc.name}): pip install 'statguard[{extra}]'"
        ) from None
    backend: Backend = getattr(module, class_name)(policy)
    return backend
