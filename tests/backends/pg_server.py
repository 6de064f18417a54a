"""A throw-away PostgreSQL cluster for the back-end tests.

``start_postgres(base)`` runs initdb and pg_ctl from the machine's PostgreSQL server
package into ``base``, on a free loopback port with fast, unsafe settings (fsync off:
the cluster is deleted after the run), and creates:

- database ``statguard_test``;
- ``statguard_owner`` (LOGIN), owner of schema ``statguard``: builds the snapshots;
- ``statguard_reader`` (LOGIN, no privileges): the guard's read-only query role.

Loopback connections are trusted (no passwords in a test cluster). As root, initdb
refuses to run, so the cluster then belongs to the ``postgres`` system user.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["PostgresServer", "postgres_available", "start_postgres"]

DATABASE = "statguard_test"
OWNER = "statguard_owner"
READER = "statguard_reader"
SUPERUSER = "postgres"
SCHEMA = "statguard"

_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "100",
    "shared_buffers": "64MB",
}


def _binaries() -> Path | None:
    """The folder holding initdb and pg_ctl: PATH first, then Debian's layout."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(os.path.realpath(found)).parent
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(folder) / "initdb").is_file() and (Path(folder) / "pg_ctl").is_file():
            return Path(folder)
    return None


def postgres_available() -> str | None:
    """None when a test cluster can be started here, else why not (a skip reason)."""
    if _binaries() is None:
        return "PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install postgresql"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed: pip install 'statguard[postgres]'"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SUPERUSER)
        except KeyError:
            return "running as root without a 'postgres' system user to own the test cluster"
        if shutil.which("runuser") is None:
            return "running as root without runuser to start the test cluster as 'postgres'"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class PostgresServer:
    """A running test cluster; ``stop()`` shuts it down."""

    bin_dir: Path
    data_dir: Path
    socket_dir: Path
    port: int
    as_user: list[str] = field(default_factory=list)
    #: a folder start_postgres made outside base_dir, removed by stop()
    owned_dir: Path | None = None
    database: str = DATABASE

    def dsn(self, role: str = READER, database: str | None = None) -> str:
        """A libpq connection string for ``role`` (trusted loopback: no password)."""
        return f"host=127.0.0.1 port={self.port} dbname={database or self.database} user={role}"

    def backend_section(self, schema: str = SCHEMA) -> dict[str, str]:
        """The policy's ``backend:`` mapping: the reader queries, the owner builds."""
        return {"engine": "postgres", "dsn": self.dsn(READER), "owner_dsn": self.dsn(OWNER), "schema": schema}

    def connect(self, role: str = SUPERUSER, database: str | None = None) -> Any:
        """A psycopg connection (autocommit) as ``role``."""
        import psycopg

        return psycopg.connect(self.dsn(role, database), autocommit=True)

    def run_sql(self, *statements: str, role: str = SUPERUSER, database: str | None = None) -> None:
        with self.connect(role, database) as con:
            for statement in statements:
                con.execute(statement)

    def stop(self) -> None:
        subprocess.run(
            [
                *self.as_user,
                str(self.bin_dir / "pg_ctl"),
                "stop",
                "-D",
                str(self.data_dir),
                "-m",
                "fast",
                "-w",
            ],
            check=False,
            capture_output=True,
        )
        if self.owned_dir is not None:
            shutil.rmtree(self.owned_dir, ignore_errors=True)


def start_postgres(base_dir: Path) -> PostgresServer:
    """Initialize and start a cluster under ``base_dir``; raises RuntimeError if it fails."""
    bin_dir = _binaries()
    if bin_dir is None:
        raise RuntimeError(postgres_available() or "PostgreSQL binaries not found")
    base_dir.mkdir(parents=True, exist_ok=True)
    as_user: list[str] = []
    cluster_dir = base_dir
    if os.geteuid() == 0:
        # initdb refuses root, so the cluster belongs to 'postgres', which must reach its
        # folder: pytest's own temporary root is private to root (and reset to 0700 by any
        # pytest session that starts), so the cluster lives in a folder of its own in /tmp
        as_user = ["runuser", "-u", SUPERUSER, "--"]
        account = pwd.getpwnam(SUPERUSER)
        cluster_dir = Path(tempfile.mkdtemp(prefix="statguard-pg-"))
        os.chown(cluster_dir, account.pw_uid, account.pw_gid)
        (base_dir / "cluster").symlink_to(cluster_dir)
        (cluster_dir / "sockets").mkdir()
        os.chown(cluster_dir / "sockets", account.pw_uid, account.pw_gid)
    else:
        (cluster_dir / "sockets").mkdir()
    data_dir, socket_dir = cluster_dir / "data", cluster_dir / "sockets"
    initdb = [*as_user, str(bin_dir / "initdb"), "-D", str(data_dir), "-U", SUPERUSER]
    initdb += ["--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"]
    _run(initdb, "initdb")
    port = _free_port()
    options = " ".join(f"-c {k}={v}" for k, v in {**_SETTINGS, "port": str(port)}.items())
    options += f" -k {socket_dir}"
    start = [*as_user, str(bin_dir / "pg_ctl"), "start", "-D", str(data_dir), "-w", "-t", "60"]
    start += ["-l", str(cluster_dir / "server.log"), "-o", options]
    _run(start, "pg_ctl start")
    server = PostgresServer(
        bin_dir, data_dir, socket_dir, port, as_user, owned_dir=cluster_dir if as_user else None
    )
    try:
        _wait_ready(server)
        server.run_sql(
            f"CREATE ROLE {OWNER} LOGIN",
            f"CREATE ROLE {READER} LOGIN",
            f"CREATE DATABASE {DATABASE} OWNER {SUPERUSER}",
            database="postgres",
        )
        with server.connect(SUPERUSER) as con:
            con.execute(f"CREATE SCHEMA {SCHEMA} AUTHORIZATION {OWNER}")
            # PUBLIC may connect (the default); nobody but the owner creates in public
            con.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    except BaseException:
        server.stop()
        raise
    return server


def _wait_ready(server: PostgresServer) -> None:
    import psycopg

    deadline = time.monotonic() + 30
    while True:
        try:
            with psycopg.connect(server.dsn(SUPERUSER, "postgres"), connect_timeout=2):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"{what} failed ({done.returncode}): {(done.stderr or done.stdout).strip()[-2000:]}"
        )
