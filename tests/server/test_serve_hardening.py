"""`guard serve` as a process under hostile conditions: a stderr nobody drains during a
flood of failed logins, TLS required on both endpoints, and the options' declarations."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest
from click.testing import CliRunner

from guard.cli.main import main
from guard.state.store import StateStore
from tests.server.certs import self_signed
from tests.server.http.conftest import ALICE, POLICIES
from tests.server.http.test_serve_cmd import BOUND, guard_command

SQL = "SELECT COUNT(*) FROM students"


@contextlib.contextmanager
def serving(tmp_path: Path, *args: str, stderr: IO[Any] | int) -> Iterator[dict[str, str]]:
    """``guard serve`` on any free ports over the students policy; yields its URLs."""
    command = guard_command(
        "serve",
        "--policy",
        str(POLICIES / "students.yaml"),
        "--state",
        str(tmp_path / "state"),
        "--http-port",
        "0",
        "--pg-port",
        "0",
        *args,
    )
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        urls: dict[str, str] = {}
        assert process.stdout is not None
        deadline = time.monotonic() + BOUND
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line or line.startswith("Ctrl-C"):
                break
            if match := re.match(r"\s+(HTTP|PostgreSQL)\s+(\S+)", line):
                urls[match.group(1)] = match.group(2)
        assert set(urls) == {"HTTP", "PostgreSQL"}, "guard serve did not start"
        yield urls
    finally:
        process.kill()
        process.wait(BOUND)


def _pg(url: str, **options: Any) -> dict[str, Any]:
    parts = urlsplit(url)
    return {
        "host": parts.hostname,
        "port": parts.port,
        "dbname": parts.path.lstrip("/"),
        "connect_timeout": BOUND,
        **options,
    }


@contextlib.contextmanager
def full_pipe() -> Iterator[int]:
    """The write end of a pipe already full and never read: a write to it blocks."""
    read, write = os.pipe()
    flags = fcntl.fcntl(write, fcntl.F_GETFL)
    fcntl.fcntl(write, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(write, b"x" * 65536)
    fcntl.fcntl(write, fcntl.F_SETFL, flags)
    try:
        yield write
    finally:
        os.close(write)
        os.close(read)


def test_a_blocked_stderr_stalls_no_client_during_a_flood_of_failed_logins(tmp_path: Path) -> None:
    # throttling off: 200 failures as fast as they come, each one a warning for the log
    options = ("--login-failures", "0", "--login-backoff", "0")
    with full_pipe() as stderr, serving(tmp_path, *options, stderr=stderr) as urls:
        pg = _pg(urls["PostgreSQL"])
        with (
            psycopg.connect(**pg, user="alice", password="alice-demo", autocommit=True) as valid,
            httpx.Client(base_url=urls["HTTP"], timeout=BOUND) as http,
        ):
            slowest = 0.0
            for n in range(100):
                name = f"{n}-" + "m" * 9_000  # about the largest a start-up packet carries
                with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
                    psycopg.connect(**pg, user=name, password="guess")
                wrong = http.post("/query", json={"sql": SQL}, headers={"Authorization": f"Bearer guess-{n}"})
                assert wrong.status_code == 401
                if n % 10 == 9:  # a valid client, on both endpoints, all along
                    started = time.monotonic()
                    assert valid.execute(SQL).fetchone() == (9,)
                    assert http.post("/query", json={"sql": SQL}, headers=ALICE).json()["rows"] == [[9]]
                    slowest = max(slowest, time.monotonic() - started)
            started = time.monotonic()
            with psycopg.connect(**pg, user="bob", password="bob-demo", autocommit=True) as late:
                assert late.execute(SQL).fetchone() == (9,)
            assert http.get("/health").status_code == 200
        assert slowest < 2 and time.monotonic() - started < 2


def test_with_a_certificate_both_endpoints_require_tls(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    tls = ("--tls-cert", str(cert), "--tls-key", str(key))
    with serving(tmp_path, *tls, stderr=subprocess.DEVNULL) as urls:
        assert urls["HTTP"].startswith("https://")
        pg = _pg(urls["PostgreSQL"], user="alice", password="alice-demo")
        with pytest.raises(psycopg.OperationalError, match="TLS required: connect with sslmode=require"):
            psycopg.connect(**pg, sslmode="disable")
        with psycopg.connect(**pg, sslmode="require") as conn:
            assert conn.pgconn.ssl_in_use and conn.execute(SQL).fetchone() == (9,)
        plain = urls["HTTP"].replace("https://", "http://")
        refused = httpx.post(f"{plain}/query", json={"sql": SQL}, headers=ALICE, timeout=BOUND)
        assert refused.status_code == 400 and "HTTPS only" in refused.json()["reason"]
        answer = httpx.post(f"{urls['HTTP']}/query", json={"sql": SQL}, headers=ALICE, verify=False)
        assert answer.json()["rows"] == [[9]]


def test_plaintext_from_loopback_when_allowed(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    args = ("--tls-cert", str(cert), "--tls-key", str(key), "--allow-plaintext-loopback")
    with serving(tmp_path, *args, stderr=subprocess.DEVNULL) as urls:
        pg = _pg(urls["PostgreSQL"], user="alice", password="alice-demo")
        with psycopg.connect(**pg, sslmode="disable") as conn:
            assert not conn.pgconn.ssl_in_use and conn.execute(SQL).fetchone() == (9,)
        plain = urls["HTTP"].replace("https://", "http://")
        answer = httpx.post(f"{plain}/query", json={"sql": SQL}, headers=ALICE, timeout=BOUND)
        assert answer.json()["rows"] == [[9]]


def test_allowing_plaintext_without_tls_is_a_usage_error() -> None:
    result = CliRunner().invoke(
        main, ["serve", "--policy", str(POLICIES / "students.yaml"), "--allow-plaintext-loopback"]
    )
    assert result.exit_code == 2 and "give them too" in result.output + result.stderr


def test_every_limit_is_an_option_with_its_default() -> None:
    shown = " ".join(CliRunner().invoke(main, ["serve", "--help"]).output.split())
    for option, default in [
        ("--max-sql-length", "100000"),
        ("--max-body-bytes", "1048576"),
        ("--max-connections", "100"),
        ("--max-connections-per-analyst", "20"),
        ("--startup-timeout", "10.0"),
        ("--idle-timeout", "3600.0"),
        ("--login-failures", "5"),
        ("--login-lockout", "60.0"),
        ("--login-backoff", "0.25"),
        ("--login-backoff-cap", "4.0"),
    ]:
        assert re.search(re.escape(option) + r" [A-Z ]+RANGE .*?\[default: " + re.escape(default), shown), (
            option
        )


def test_both_endpoints_share_one_throttle(tmp_path: Path) -> None:
    options = ("--login-failures", "2", "--login-backoff", "0.05")
    with serving(tmp_path, *options, stderr=subprocess.DEVNULL) as urls:
        pg = _pg(urls["PostgreSQL"])
        for guess in ("guess-1", "guess-2"):  # two failures over PostgreSQL ...
            with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
                psycopg.connect(**pg, user="mallory", password=guess)
        # ... lock this address out of HTTP too, whatever the token
        locked = httpx.post(f"{urls['HTTP']}/query", json={"sql": SQL}, headers=ALICE, timeout=BOUND)
        assert locked.status_code == 429 and "too many failed logins" in locked.json()["reason"]
        with pytest.raises(psycopg.OperationalError, match="too many failed logins"):
            psycopg.connect(**pg, user="alice", password="alice-demo")


def test_failed_logins_are_counted_in_the_query_log(tmp_path: Path) -> None:
    options = ("--login-failures", "0", "--login-backoff", "0.01")
    with serving(tmp_path, *options, stderr=subprocess.DEVNULL) as urls:
        pg = _pg(urls["PostgreSQL"])
        for guess in ("guess-1", "guess-2"):
            with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
                psycopg.connect(**pg, user="mallory" + "x" * 5000, password=guess)
        wrong = {"Authorization": "Bearer not-a-password"}
        assert httpx.post(f"{urls['HTTP']}/query", json={"sql": SQL}, headers=wrong, timeout=BOUND).is_error
        deadline = time.monotonic() + BOUND  # the hook runs on a worker thread after the answer
        while time.monotonic() < deadline:
            answer = httpx.get(f"{urls['HTTP']}/health", timeout=BOUND)
            if answer.status_code == 200:
                break
        time.sleep(0.5)
    store = StateStore(tmp_path / "state", read_only=True)
    try:
        failed = [r for r in store.log() if r["decision"] == "login-failed"]
        assert store.verify()[1] is None
    finally:
        store.close()
    assert len(failed) == 3
    assert {r["reason"].split(" from ")[0] for r in failed} == {
        "failed login on the postgresql endpoint",
        "failed login on the http endpoint",
    }
    assert all(len(r["analyst"]) < 300 for r in failed)  # a client-chosen name is bounded
