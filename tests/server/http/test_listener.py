"""The HTTP listener as `guard serve` runs it: TLS required (plaintext refused, or allowed
from loopback), the connection limit, and clients that are too slow to send a request."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from guard import Guard
from guard.server import httpconn
from guard.server.limits import ServeLimits
from guard.server.listen import bind, tls_context
from guard.server.serve import Endpoints, http_server
from tests.server.certs import self_signed
from tests.server.http.conftest import ALICE, POLICIES

SQL = "SELECT COUNT(*) FROM students"


@pytest.fixture(scope="module")
def guard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guard]:
    with Guard.open(POLICIES / "students.yaml", state=tmp_path_factory.mktemp("state")) as opened:
        yield opened


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> ssl.SSLContext:
    cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    return tls_context(cert, key)


@pytest.fixture
def listening(guard: Guard) -> Iterator[Callable[..., int]]:
    """listening(**endpoint_options) -> the port of a running HTTP server, stopped after the test."""
    stops: list[Callable[[], None]] = []

    def start(**options: Any) -> int:
        sock = bind("127.0.0.1", 0, "HTTP", "--http-port")
        server = http_server(guard, Endpoints(**options))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the HTTP server did not start"
            time.sleep(0.01)

        def stop() -> None:
            server.should_exit = True
            thread.join(10)

        stops.append(stop)
        return int(sock.getsockname()[1])

    yield start
    for stop in stops:
        stop()


def _query(url: str, **client: Any) -> httpx.Response:
    with httpx.Client(base_url=url, timeout=10, **client) as http:
        return http.post("/query", json={"sql": SQL}, headers=ALICE)


def test_with_tls_https_is_answered_and_plain_http_refused(
    listening: Callable[..., int], tls: ssl.SSLContext
) -> None:
    port = listening(tls=tls)
    answer = _query(f"https://127.0.0.1:{port}", verify=False)
    assert answer.status_code == 200 and answer.json()["rows"] == [[9]]
    refused = _query(f"http://127.0.0.1:{port}")
    assert refused.status_code == 400 and "speaks HTTPS only" in refused.json()["reason"]


def test_plain_http_from_loopback_when_allowed(listening: Callable[..., int], tls: ssl.SSLContext) -> None:
    port = listening(tls=tls, allow_plaintext_loopback=True)
    assert _query(f"http://127.0.0.1:{port}").json()["rows"] == [[9]]
    assert _query(f"https://127.0.0.1:{port}", verify=False).json()["rows"] == [[9]]


def test_plain_http_from_elsewhere_is_refused_even_when_loopback_is_allowed(
    listening: Callable[..., int], tls: ssl.SSLContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    # traffic stays on 127.0.0.1: the listener is made to see its client as a remote one
    monkeypatch.setattr(httpconn, "is_loopback", lambda host: False)
    port = listening(tls=tls, allow_plaintext_loopback=True)
    assert _query(f"http://127.0.0.1:{port}").status_code == 400
    assert _query(f"https://127.0.0.1:{port}", verify=False).status_code == 200


def test_connections_over_the_limit_get_503(listening: Callable[..., int]) -> None:
    port = listening(limits=ServeLimits(max_connections=2))
    held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(2)]
    try:
        time.sleep(0.2)
        refused = _query(f"http://127.0.0.1:{port}")
        assert refused.status_code == 503 and "limit of 2 connections" in refused.json()["reason"]
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.2)
    assert _query(f"http://127.0.0.1:{port}").status_code == 200


@pytest.mark.parametrize(
    ("with_tls", "sent"),
    [
        (False, b""),  # connects and says nothing
        (False, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: "),  # slowloris: a head never finished
        (True, b""),  # says nothing, not even a TLS hello
    ],
)
def test_a_client_too_slow_to_send_a_request_is_cut_off(
    listening: Callable[..., int], tls: ssl.SSLContext, with_tls: bool, sent: bytes
) -> None:
    port = listening(tls=tls if with_tls else None, limits=ServeLimits(startup_timeout=0.5))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(sent)
        started = time.monotonic()
        with contextlib.suppress(ConnectionResetError):  # EOF, or a reset (aborted with unread data)
            while sock.recv(4096):
                pass
        assert time.monotonic() - started < 3  # the server closed it, not our own timeout


def test_a_kept_alive_connection_goes_on_while_requests_come_in_time(listening: Callable[..., int]) -> None:
    port = listening(limits=ServeLimits(startup_timeout=0.5))
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
        for _ in range(3):
            assert http.post("/query", json={"sql": SQL}, headers=ALICE).status_code == 200
            time.sleep(0.2)


def test_a_long_query_is_not_cut_off_by_the_start_up_timeout(
    listening: Callable[..., int], guard: Guard, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = guard.query

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(1.0)
        return real(*args, **kwargs)

    monkeypatch.setattr(guard, "query", slow)
    port = listening(limits=ServeLimits(startup_timeout=0.3))
    assert _query(f"http://127.0.0.1:{port}").status_code == 200


def test_the_listener_needs_one_socket(guard: Guard) -> None:
    server = http_server(guard, Endpoints())
    with pytest.raises(ValueError, match="exactly one listening socket"):
        server.run(sockets=[])
