"""Policies pointed at the test cluster (``postgres_server``, in tests/backends/conftest.py)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.backends.pg_server import PostgresServer

ROOT = Path(__file__).resolve().parents[3]
POLICIES = ROOT / "policies"
_SCHEMAS = itertools.count()
_POLICIES = itertools.count()


@pytest.fixture
def schema(postgres_server: PostgresServer) -> str:
    """A schema name no other test uses (created by the guard's owner role on open)."""
    return f"guard_{next(_SCHEMAS)}"


def write_policy(
    source: str,
    target: Path,
    backend: dict[str, str],
    change: Callable[[dict[str, Any]], None] | None = None,
) -> Path:
    """policies/SOURCE.yaml with absolute source paths, the given backend, and ``change``."""
    document = yaml.safe_load((POLICIES / f"{source}.yaml").read_text())
    for table in document["tables"].values():
        kind, path = next(iter(table["source"].items()))
        if kind != "table":
            table["source"][kind] = str((POLICIES / path).resolve())
    document["backend"] = backend
    if change is not None:
        change(document)
    target.mkdir(parents=True, exist_ok=True)
    path = target / f"{source}-{next(_POLICIES)}.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.fixture
def pg_policy(tmp_path: Path, postgres_server: PostgresServer, schema: str) -> Callable[..., Path]:
    """Writes a copy of an example policy that queries the test cluster in ``schema``."""

    def _write(
        source: str, change: Callable[[dict[str, Any]], None] | None = None, **backend: str | None
    ) -> Path:
        # a backend option given as None is left out
        merged = {**postgres_server.backend_section(schema), **backend}
        section = {key: value for key, value in merged.items() if value is not None}
        return write_policy(source, tmp_path / "policies", section, change)

    return _write
