"""Policies pointed at the test cluster (``postgres_server``, in tests/backends/conftest.py)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.backends.pg_server import PostgresServer
from tests.backends.policy_copies import policy_copy

_SCHEMAS = itertools.count()


@pytest.fixture
def schema(postgres_server: PostgresServer) -> str:
    """A schema name no other test uses (created by the guard's owner role on open)."""
    return f"guard_{next(_SCHEMAS)}"


@pytest.fixture
def pg_policy(tmp_path: Path, postgres_server: PostgresServer, schema: str) -> Callable[..., Path]:
    """Writes a copy of an example policy that queries the test cluster in ``schema``."""

    def _write(
        source: str, change: Callable[[dict[str, Any]], None] | None = None, **backend: str | None
    ) -> Path:
        # a backend option given as None is left out
        merged = {**postgres_server.backend_section(schema), **backend}
        section = {key: value for key, value in merged.items() if value is not None}
        return policy_copy(source, tmp_path / "policies", section, change)

    return _write
