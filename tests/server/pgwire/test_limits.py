"""The PostgreSQL endpoint's limits: SQL length, connections in all and per analyst,
start-up and idle timeouts."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from guard.server.limits import ServeLimits

SQL = "SELECT COUNT(*) FROM students"


def test_sql_longer_than_the_limit_is_refused_before_the_guard_sees_it(
    serve: Callable[..., Any], wire: Callable[..., Any]
) -> None:
    endpoint = serve("students", limits=ServeLimits(max_sql_length=200))
    client = wire(endpoint)
    long = SQL + " WHERE " + " OR ".join(["major = 'EE'"] * 20)
    reply = client.query(long)
    assert reply.kinds() == b"EZ" and reply.errors()[0]["C"] == "54000"
    message = reply.errors()[0]["M"]
    assert f"statement is {len(long)} characters long" in message and "at most 200" in message
    assert "--max-sql-length" in message
    client.parse(long)
    reply = client.sync()
    assert reply.kinds() == b"EZ" and reply.errors()[0]["C"] == "54000"
    assert endpoint.log_size() == 0  # refused at the door: nothing parsed, nothing stored
    assert client.query(SQL).rows() == [[b"9"]]  # the session goes on


def test_connections_per_analyst_are_limited(serve: Callable[..., Any], wire: Callable[..., Any]) -> None:
    endpoint = serve("students", limits=ServeLimits(max_connections_per_analyst=2))
    first = psycopg.connect(endpoint.dsn(), autocommit=True)
    second = psycopg.connect(endpoint.dsn(), autocommit=True)
    try:
        with pytest.raises(psycopg.OperationalError, match='too many connections for analyst "alice"'):
            psycopg.connect(endpoint.dsn())
        refused = wire(endpoint, login=False).startup().errors()[0]
        assert refused["C"] == "53300" and "--max-connections-per-analyst" in refused["M"]
        with psycopg.connect(endpoint.dsn(user="bob", password="bob-demo"), autocommit=True) as bob:
            assert bob.execute(SQL).fetchone() == (9,)  # another analyst has room of their own
        first.close()
        time.sleep(0.2)  # the server sees the session end
        with psycopg.connect(endpoint.dsn(), autocommit=True) as again:  # a place came free
            assert again.execute(SQL).fetchone() == (9,)
    finally:
        first.close()
        second.close()


def test_connections_in_all_are_limited(serve: Callable[..., Any], wire: Callable[..., Any]) -> None:
    endpoint = serve("students", limits=ServeLimits(max_connections=2))
    held = [wire(endpoint, login=False), wire(endpoint, login=False)]  # not even logged in
    time.sleep(0.2)
    with pytest.raises(psycopg.OperationalError, match="too many clients already"):
        psycopg.connect(endpoint.dsn(connect_timeout="10"))
    refused = wire(endpoint, login=False).startup()
    assert refused.kinds() == b"E" and refused.errors()[0]["C"] == "53300"
    for client in held:
        client.close()
    time.sleep(0.2)
    with psycopg.connect(endpoint.dsn(), autocommit=True) as conn:
        assert conn.execute(SQL).fetchone() == (9,)


@pytest.mark.parametrize(
    "partial",
    [
        b"",  # connects and says nothing
        struct.pack("!i", 40) + struct.pack("!i", 3 << 16) + b"user\x00al",  # a start-up cut short
    ],
)
def test_a_client_that_does_not_log_in_in_time_is_closed(serve: Callable[..., Any], partial: bytes) -> None:
    endpoint = serve("students", limits=ServeLimits(startup_timeout=0.5))
    with socket.create_connection(("127.0.0.1", endpoint.port), timeout=10) as sock:
        sock.sendall(partial)
        started = time.monotonic()
        received = b""
        while chunk := sock.recv(4096):
            received += chunk
        assert time.monotonic() - started < 3  # closed by the server, not by our own timeout
    assert b"canceling authentication due to timeout" in received and b"57014" in received


def test_a_client_that_stops_after_the_password_request_is_closed(
    serve: Callable[..., Any], wire: Callable[..., Any]
) -> None:
    endpoint = serve("students", limits=ServeLimits(startup_timeout=0.5))
    client = wire(endpoint, login=False)
    client.raw(struct.pack("!i", 4 + 4 + 11 + 1) + struct.pack("!i", 3 << 16) + b"user\x00alice\x00\x00")
    kind, _ = client.read()
    assert kind == b"R"  # the SASL request, never answered
    kind, body = client.read()
    assert kind == b"E" and b"57014" in body
    with pytest.raises(ConnectionError):
        client.read()


def test_an_idle_session_is_closed(serve: Callable[..., Any], wire: Callable[..., Any]) -> None:
    endpoint = serve("students", limits=ServeLimits(idle_timeout=1))
    client = wire(endpoint)
    assert client.query(SQL).rows() == [[b"9"]]
    started = time.monotonic()
    kind, body = client.read()
    assert kind == b"E" and b"57P05" in body and b"idle-session timeout" in body
    assert 0.8 < time.monotonic() - started < 5
    with pytest.raises(ConnectionError):
        client.read()


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_connections=0: must be positive"):
        ServeLimits(max_connections=0)
