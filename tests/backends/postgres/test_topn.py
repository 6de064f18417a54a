"""The MAX_JOIN top-n template gives WINDOW's cells on PostgreSQL (tests/backends/topn_cases.py)."""

from __future__ import annotations

from pathlib import Path

from guard import Guard
from tests.backends.pg_server import PostgresServer
from tests.backends.topn_cases import compare_templates, write_policy


def test_max_join_gives_the_window_templates_cells(
    postgres_server: PostgresServer, schema: str, tmp_path: Path
) -> None:
    policy = write_policy(tmp_path / "policy", postgres_server.backend_section(schema))
    with Guard.open(policy, state=tmp_path / "state") as guard:
        assert guard.backend.capabilities.dialect == "postgres"
        assert compare_templates(guard) > 50
