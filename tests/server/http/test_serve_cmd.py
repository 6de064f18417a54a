"""`guard serve` as a process (loopback, bounded waits) and `guard password`."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest
from click.testing import CliRunner

from guard.cli.main import main
from guard.policy.credentials import parse_verifier, verify_password
from tests.server.http.conftest import ALICE, POLICIES

#: seconds any one step may take before the test fails instead of hanging
BOUND = 20


def guard_command(*args: str) -> list[str]:
    return [sys.executable, "-c", "from guard.cli.main import main; main()", *args]


@contextmanager
def serving(*args: str) -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    """``guard serve ARGS`` running; yields the process and its URLs by endpoint."""
    process = subprocess.Popen(
        guard_command("serve", *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        urls: dict[str, str] = {}
        deadline = time.monotonic() + BOUND
        assert process.stdout is not None
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line or line.startswith("Ctrl-C"):
                break
            if match := re.match(r"\s+(HTTP|PostgreSQL)\s+(\S+)", line):
                urls[match.group(1)] = match.group(2)
        assert urls, (
            f"guard serve did not start: {process.stderr.read() if process.poll() is not None else ''}"
        )
        yield process, urls
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(BOUND)


def test_serve_answers_on_both_endpoints_and_stops_on_sigterm(tmp_path: Path) -> None:
    policy = str(POLICIES / "students.yaml")
    args = ("--policy", policy, "--state", str(tmp_path), "--http-port", "0", "--pg-port", "0")
    with serving(*args) as (process, urls):
        assert urls["HTTP"].startswith("http://127.0.0.1:")
        with httpx.Client(base_url=urls["HTTP"], timeout=BOUND) as client:
            assert client.get("/health").json() == {"status": "ok", "policy": "students"}
            answer = client.post("/query", json={"sql": "SELECT COUNT(*) FROM students"}, headers=ALICE)
            assert answer.json()["rows"] == [[9]]
        pg = urlsplit(urls["PostgreSQL"])
        assert pg.hostname == "127.0.0.1"
        with psycopg.connect(
            host=pg.hostname,
            port=pg.port,
            dbname=pg.path.lstrip("/"),
            user="bob",
            password="bob-demo",
            sslmode="disable",
            connect_timeout=BOUND,
        ) as connection:
            rows = connection.execute("SELECT major, COUNT(*) FROM students GROUP BY major").fetchall()
        assert rows == [("CS", 5), ("EE", 4)]
        process.send_signal(signal.SIGTERM)
        assert process.wait(BOUND) == 0
        _, err = process.communicate(timeout=BOUND)
    assert "stopped" in err and "Traceback" not in err
    # the state store was closed, and holds both requests
    listing = subprocess.run(
        guard_command("log", "--policy", policy, "--state", str(tmp_path), "--format", "json"),
        capture_output=True,
        text=True,
        timeout=BOUND,
    )
    assert listing.returncode == 0
    assert [json.loads(line)["analyst"] for line in listing.stdout.splitlines()] == ["alice", "bob"]


def test_serve_on_a_port_in_use_exits_2_with_a_message(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        args = (
            "--policy",
            str(POLICIES / "students.yaml"),
            "--state",
            str(tmp_path),
            "--http-port",
            port,
            "--no-pg",
        )
        result = subprocess.run(guard_command("serve", *args), capture_output=True, text=True, timeout=BOUND)
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port} for HTTP: the port is already in use" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--no-pg", "--no-http"), "leave nothing to serve"),
        (("--tls-cert", "cert.pem"), "--tls-cert and --tls-key go together"),
        (("--tls-cert", "missing.pem", "--tls-key", "missing.pem", "--no-pg"), "cannot use --tls-cert"),
    ],
)
def test_serve_usage_errors_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: tuple[str, ...], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["serve", "--policy", str(POLICIES / "students.yaml"), *extra])
    assert result.exit_code == 2 and message in result.output + result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_password_from_stdin_prints_a_verifier_of_it() -> None:
    result = CliRunner().invoke(main, ["password", "--stdin"], input="s3cret pass\n")
    assert result.exit_code == 0
    verifier = parse_verifier(result.stdout.strip())
    assert verify_password(verifier, "s3cret pass")
    assert not verify_password(verifier, "s3cret pass\n") and not verify_password(verifier, "s3cret")
    assert "s3cret" not in result.stdout


def test_password_prompt_asks_twice_and_refuses_an_empty_one() -> None:
    result = CliRunner().invoke(main, ["password"], input="pw-1\npw-1\n")
    assert result.exit_code == 0 and verify_password(parse_verifier(result.stdout.strip()), "pw-1")
    assert CliRunner().invoke(main, ["password", "--stdin"], input="\n").exit_code == 2
