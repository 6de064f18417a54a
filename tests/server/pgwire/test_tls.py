"""TLS: SSLRequest answered 'S' and the session encrypted when the server has a certificate;
plaintext start-ups refused then (28000), unless allowed from loopback clients."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from guard.server.pgwire import startup
from tests.server.certs import self_signed


@pytest.fixture(scope="module")
def tls_context(tmp_path_factory: pytest.TempPathFactory) -> ssl.SSLContext:
    cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


@pytest.fixture(scope="module")
def tls_students(serve: Callable[..., Any], tls_context: ssl.SSLContext) -> Any:
    return serve("students", ssl_context=tls_context)


@pytest.fixture(scope="module")
def tls_or_loopback_students(serve: Callable[..., Any], tls_context: ssl.SSLContext) -> Any:
    """TLS, and plaintext from loopback clients too (--allow-plaintext-loopback)."""
    return serve("students", ssl_context=tls_context, allow_plaintext_loopback=True)


def test_sslmode_require_gets_an_encrypted_session(tls_students: Any) -> None:
    with psycopg.connect(tls_students.dsn(sslmode="require"), autocommit=True) as conn:
        assert conn.pgconn.ssl_in_use
        assert conn.execute("SELECT major, COUNT(*) FROM students GROUP BY major").fetchall() == [
            ("CS", 5),
            ("EE", 4),
        ]
        conn.cancel_safe()  # nothing runs: the cancel connection (over TLS too) changes nothing
        assert conn.execute("SELECT COUNT(*) FROM students").fetchone() == (9,)


def test_plaintext_logins_are_refused_when_the_server_has_a_certificate(
    tls_students: Any, wire: Callable[..., Any]
) -> None:
    logged = tls_students.log_size()
    with pytest.raises(psycopg.OperationalError, match="TLS required: connect with sslmode=require"):
        psycopg.connect(tls_students.dsn(sslmode="disable"))
    refused = wire(tls_students, login=False).startup()
    assert refused.kinds() == b"E"  # before any authentication request: no password is sent
    assert refused.errors()[0]["C"] == "28000" and refused.errors()[0]["S"] == "FATAL"
    assert tls_students.log_size() == logged


def test_plain_connections_from_loopback_are_accepted_when_allowed(tls_or_loopback_students: Any) -> None:
    with psycopg.connect(tls_or_loopback_students.dsn(sslmode="disable"), autocommit=True) as conn:
        assert not conn.pgconn.ssl_in_use
        assert conn.execute("SELECT COUNT(*) FROM students").fetchone() == (9,)
    with psycopg.connect(tls_or_loopback_students.dsn(sslmode="require"), autocommit=True) as conn:
        assert conn.pgconn.ssl_in_use


def test_plaintext_from_another_address_is_refused_even_when_loopback_is_allowed(
    tls_or_loopback_students: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # traffic stays on 127.0.0.1: the server is made to see its client as a remote one
    monkeypatch.setattr(startup, "is_loopback", lambda host: False)
    with pytest.raises(psycopg.OperationalError, match="TLS required"):
        psycopg.connect(tls_or_loopback_students.dsn(sslmode="disable"))
    with psycopg.connect(tls_or_loopback_students.dsn(sslmode="require"), autocommit=True) as conn:
        assert conn.execute("SELECT COUNT(*) FROM students").fetchone() == (9,)
