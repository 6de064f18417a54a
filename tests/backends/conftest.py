"""Engines shared by the back-end tests: one throw-away PostgreSQL cluster per run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.backends.pg_server import DATABASE, OWNER, PostgresServer, postgres_available, start_postgres


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    reason = postgres_available()
    if reason is not None:
        pytest.skip(reason)
    server = start_postgres(tmp_path_factory.mktemp("postgres"))
    # the owner may create a fresh schema per test, so tests never share snapshots
    server.run_sql(f"GRANT CREATE ON DATABASE {DATABASE} TO {OWNER}")
    yield server
    server.stop()
