"""The HTTP API's limits and login throttling: body size checked before reading, slow bodies,
SQL length, back-off and lockout by address."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from guard import Guard
from guard.server.http import create_app
from guard.server.limits import ServeLimits
from guard.server.throttle import LoginThrottle, ThrottleSettings
from tests.server.http.conftest import ALICE, POLICIES, live

SQL = "SELECT COUNT(*) FROM students"


@contextmanager
def served(tmp_path: Path, **options: Any) -> Iterator[tuple[Guard, str]]:
    with (
        Guard.open(POLICIES / "students.yaml", state=tmp_path / "state") as guard,
        live(create_app(guard, **options)) as url,
    ):
        yield guard, url


def _exchange(url: str, request: bytes, wait: float = 10) -> bytes:
    """Send raw bytes, read until the server closes (or ``wait`` seconds pass)."""
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        sock.sendall(request)
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except TimeoutError:
            pass
        return answer


def _status_and_body(answer: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def _post_head(length: str, extra: str = "") -> bytes:
    return (
        "POST /query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alice-demo\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n{extra}\r\n"
    ).encode()


def test_a_declared_body_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    with served(tmp_path, limits=ServeLimits(max_body_bytes=1000)) as (guard, url):
        started = time.monotonic()
        # 200 MB announced, not one byte of it sent: the answer cannot depend on reading it
        answer = _exchange(url, _post_head("200000000"))
        assert time.monotonic() - started < 5
        status, body = _status_and_body(answer)
        assert status == 413 and b"connection: close" in answer.lower()
        assert body["error"] == "RequestEntityTooLarge"
        assert "200000000 bytes" in body["reason"] and "at most 1000" in body["reason"]
        assert "--max-body-bytes" in body["reason"]
        assert guard.log() == []


def test_a_chunked_body_is_cut_off_at_the_limit(tmp_path: Path) -> None:
    with served(tmp_path, limits=ServeLimits(max_body_bytes=1000)) as (guard, url):
        head = (
            b"POST /query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alice-demo\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"a" * 600
        chunks = b"".join(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n" for _ in range(3))
        status, body = _status_and_body(_exchange(url, head + chunks))
        assert status == 413 and "larger than 1000 bytes" in body["reason"]
        assert guard.log() == []


def test_a_body_within_the_limit_is_answered(tmp_path: Path) -> None:
    with served(tmp_path, limits=ServeLimits(max_body_bytes=1000)) as (_, url):
        answer = httpx.post(f"{url}/query", json={"sql": SQL}, headers=ALICE, timeout=10)
        assert answer.status_code == 200 and answer.json()["rows"] == [[9]]


def test_a_body_that_does_not_arrive_in_time_is_refused(tmp_path: Path) -> None:
    with served(tmp_path, limits=ServeLimits(startup_timeout=0.5)) as (guard, url):
        started = time.monotonic()
        status, body = _status_and_body(_exchange(url, _post_head("50") + b'{"sql": '))
        assert time.monotonic() - started < 5
        assert status == 408 and "within 0.5 s" in body["reason"]
        assert guard.log() == []


def test_sql_over_the_endpoint_limit_is_413_and_not_logged(tmp_path: Path) -> None:
    with served(tmp_path, limits=ServeLimits(max_sql_length=100)) as (guard, url):
        sql = SQL + " WHERE " + " OR ".join(["major = 'EE'"] * 10)
        answer = httpx.post(f"{url}/query", json={"sql": sql}, headers=ALICE, timeout=10)
        assert answer.status_code == 413
        reason = answer.json()["reason"]
        assert f"{len(sql)} characters long" in reason and "at most 100" in reason
        assert "--max-sql-length" in reason
        assert guard.log() == []
        assert httpx.post(f"{url}/query", json={"sql": SQL}, headers=ALICE, timeout=10).status_code == 200


@pytest.fixture
def throttled(tmp_path: Path) -> Iterator[tuple[Guard, str, list[tuple[str, str | None, str]]]]:
    calls: list[tuple[str, str | None, str]] = []
    settings = ThrottleSettings(max_failures=3, backoff=0.2, backoff_cap=1.0, lockout=60)

    def hook(endpoint: str, user: str | None, address: str) -> None:
        calls.append((endpoint, user, address))

    with served(tmp_path, throttle=LoginThrottle(settings), on_failed_login=hook) as (guard, url):
        yield guard, url, calls


def _timed_post(url: str, token: str | None) -> tuple[httpx.Response, float]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    started = time.monotonic()
    response = httpx.post(f"{url}/query", json={"sql": SQL}, headers=headers, timeout=10)
    return response, time.monotonic() - started


def test_wrong_tokens_back_off_then_lock_the_address_out(throttled: Any) -> None:
    guard, url, calls = throttled
    first, took_first = _timed_post(url, "guess-1")
    second, took_second = _timed_post(url, "guess-1")  # a remembered failure is still a failure
    assert first.status_code == second.status_code == 401
    assert 0.2 <= took_first < 0.7 and 0.4 <= took_second < 0.9
    assert _timed_post(url, "guess-2")[0].status_code == 401
    locked, took = _timed_post(url, "alice-demo")  # even the right token, unchecked
    assert locked.status_code == 429 and took < 0.5
    assert "too many failed logins" in locked.json()["reason"]
    assert 55 <= int(locked.headers["retry-after"]) <= 61
    assert calls == [("http", None, "127.0.0.1")] * 3
    assert guard.log() == []


def test_a_request_without_credentials_is_not_a_failed_login(tmp_path: Path) -> None:
    # a backoff of a whole second, so that "not delayed" holds on a loaded machine too
    # (a plain 401 took 0.29 s at load 15; a delayed one takes at least the backoff)
    calls: list[tuple[str, str | None, str]] = []
    settings = ThrottleSettings(max_failures=3, backoff=1.0, backoff_cap=2.0, lockout=60)

    def hook(endpoint: str, user: str | None, address: str) -> None:
        calls.append((endpoint, user, address))

    with served(tmp_path, throttle=LoginThrottle(settings), on_failed_login=hook) as (_, url):
        for _ in range(5):
            response, took = _timed_post(url, None)
            assert response.status_code == 401 and took < 0.9
        assert calls == []
        assert _timed_post(url, "alice-demo")[0].status_code == 200


def test_the_delay_does_not_hold_up_other_requests(tmp_path: Path) -> None:
    slow = LoginThrottle(ThrottleSettings(backoff=2.0))
    with served(tmp_path, throttle=slow) as (_, url):
        failing = threading.Thread(target=_timed_post, args=(url, "guess"))
        failing.start()
        try:
            time.sleep(0.2)  # the failed login is waiting out its 2 s
            response, took = _timed_post(url, "alice-demo")
            assert response.status_code == 200 and took < 1.0
        finally:
            failing.join(10)
