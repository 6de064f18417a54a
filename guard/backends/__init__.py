"""Data engines behind the guard: DuckDB (embedded default), PostgreSQL, Spark.

:func:`open_backend` opens the policy's engine as :data:`guard.engines.ENGINES` (the one
table of engines) says: the module and class that implement it, and the pip extra that
installs its client library.
"""

from __future__ import annotations

import importlib

from guard.backends.base import Backend
from guard.engines import ENGINE_NAMES, ENGINES, Engine
from guard.errors import BackendError
from guard.policy.model import Policy

__all__ = ["open_backend"]


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
