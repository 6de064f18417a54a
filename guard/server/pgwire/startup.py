"""A connection's first steps: encryption, cancel requests, start-up and authentication.

Order, as in PostgreSQL: SSLRequest ('S' and a TLS handshake when the server has a
certificate, 'N' otherwise) and GSSENCRequest ('N') may come first; a CancelRequest
is handled and the connection closed (encrypted or not, as PostgreSQL does: older
clients send it in plaintext); then the StartupMessage. A server with a certificate
refuses a plaintext start-up (28000, as a ``hostssl`` line of pg_hba would) unless
plaintext from loopback clients is allowed and the client is one. A full server says so
(53300); a locked-out user name or address is refused before any password is checked
(:mod:`guard.server.throttle`). Then SCRAM-SHA-256 against the analyst's stored verifier,
and only then the database name. Unknown analysts, analysts without a password and
wrong passwords all fail with one message, after one back-off delay.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from guard.policy.model import Policy
from guard.server.listen import is_loopback
from guard.server.pgwire import messages, sqlstate
from guard.server.pgwire.catalog_queries import DATABASE
from guard.server.pgwire.messages import (
    CANCEL_REQUEST,
    GSSENC_REQUEST,
    PROTOCOL_3_0,
    SSL_REQUEST,
    StartupPacket,
    decode_sasl_initial,
    read_message,
    read_startup,
)
from guard.server.pgwire.scram import MECHANISM, ScramExchange
from guard.server.pgwire.settings import SessionSettings
from guard.server.pgwire.sqlstate import SqlError
from guard.server.serverlog import untrusted
from guard.server.throttle import LoginThrottle, lockout_message

__all__ = ["Login", "LoginFailed", "StartupContext", "start"]

log = logging.getLogger(__name__)

#: longest SASL message read before authentication (PostgreSQL's PG_MAX_AUTH_TOKEN_LENGTH)
_MAX_AUTH = 65_535


@dataclass(frozen=True)
class StartupContext:
    policy: Policy
    ssl_context: ssl.SSLContext | None
    #: keys the mock SCRAM exchange of unknown users (stable per server)
    mock_secret: bytes
    #: forwards a CancelRequest: (process id, secret key)
    cancel: Callable[[int, int], None]
    throttle: LoginThrottle
    #: with TLS: plaintext start-ups from loopback clients are accepted too
    allow_plaintext_loopback: bool = False
    #: None while another session may start, else the refusal (the connection limit)
    full: Callable[[], str | None] = lambda: None


class LoginFailed(SqlError):
    """Wrong credentials: answered after ``delay`` seconds (the throttle's back-off)."""

    def __init__(self, message: str, user: str, delay: float) -> None:
        super().__init__(sqlstate.INVALID_PASSWORD, message, fatal=True)
        self.user = user
        self.delay = delay


@dataclass(frozen=True)
class Login:
    """An authenticated session: who, with which parameters."""

    analyst: str
    settings: SessionSettings
    encrypted: bool


async def start(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, context: StartupContext, peer: str
) -> Login | None:
    """Negotiate and authenticate the client at ``peer`` (its address, no port). None
    when the connection only carried a CancelRequest.

    Raises:
        LoginFailed: wrong credentials (the caller waits its delay, then sends it).
        SqlError: other fatal start-up failures (the caller sends them and closes).
    """
    packet, encrypted = await _startup_packet(reader, writer, context)
    if packet.code == CANCEL_REQUEST:
        context.cancel(packet.process_id, packet.secret_key)
        return None
    plaintext_allowed = context.allow_plaintext_loopback and is_loopback(peer)
    if context.ssl_context is not None and not encrypted and not plaintext_allowed:
        raise SqlError(
            sqlstate.INVALID_AUTHORIZATION, "TLS required: connect with sslmode=require", fatal=True
        )
    refusal = context.full()
    if refusal is not None:
        raise SqlError(sqlstate.TOO_MANY_CONNECTIONS, refusal, fatal=True)
    if packet.code >> 16 != 3:
        raise SqlError(
            sqlstate.FEATURE_NOT_SUPPORTED,
            f"unsupported frontend protocol {packet.code >> 16}.{packet.code & 0xFFFF}: 3.0 is supported",
            fatal=True,
        )
    unrecognized = [name for name in packet.parameters if name.startswith("_pq_.")]
    if packet.code != PROTOCOL_3_0 or unrecognized:
        writer.write(messages.negotiate_protocol_version(0, unrecognized))
    parameters = packet.parameters
    user = parameters.get("user", "")
    if not user:
        raise SqlError(
            sqlstate.INVALID_AUTHORIZATION, "no user name specified in the startup packet", fatal=True
        )
    if parameters.get("replication", "false").lower() not in ("false", "off", "no", "0"):
        raise SqlError(
            sqlstate.FEATURE_NOT_SUPPORTED, "replication connections are not supported", fatal=True
        )
    locked = context.throttle.locked(user, peer)
    if locked > 0:
        log.warning("login refused for user %s from %s: locked out", untrusted(user), peer)
        raise SqlError(sqlstate.INVALID_AUTHORIZATION, lockout_message(locked), fatal=True)
    await _authenticate(reader, writer, context, user, peer)
    context.throttle.succeeded(user)
    database = parameters.get("database") or user
    if database != DATABASE:
        raise SqlError(
            sqlstate.INVALID_CATALOG_NAME,
            f'database "{database}" does not exist: connect to database "{DATABASE}"',
            fatal=True,
        )
    writer.write(messages.authentication(0))
    analyst = context.policy.analyst(user)
    assert analyst is not None  # _authenticate succeeded
    settings = SessionSettings(analyst.name)
    settings.apply_startup(parameters)
    return Login(analyst.name, settings, encrypted)


async def _startup_packet(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, context: StartupContext
) -> tuple[StartupPacket, bool]:
    encrypted = False
    while True:
        packet = await read_startup(reader)
        if packet.code == SSL_REQUEST and not encrypted:
            if context.ssl_context is None:
                writer.write(b"N")
                continue
            writer.write(b"S")
            await writer.drain()
            await writer.start_tls(context.ssl_context)
            encrypted = True
        elif packet.code == GSSENC_REQUEST and not encrypted:
            writer.write(b"N")
        elif packet.code in (SSL_REQUEST, GSSENC_REQUEST):
            raise SqlError(sqlstate.PROTOCOL_VIOLATION, "encryption was already negotiated", fatal=True)
        else:
            return packet, encrypted


async def _authenticate(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, context: StartupContext, user: str, peer: str
) -> None:
    analyst = context.policy.analyst(user)
    verifier = analyst.password if analyst is not None else None
    exchange = ScramExchange(verifier, user, context.mock_secret)
    writer.write(messages.authentication_sasl([MECHANISM]))
    await writer.drain()
    mechanism, client_first = decode_sasl_initial(await _sasl_message(reader))
    if mechanism != MECHANISM:
        raise SqlError(
            sqlstate.PROTOCOL_VIOLATION,
            f"client selected an invalid SASL authentication mechanism: {mechanism}",
            fatal=True,
        )
    writer.write(messages.authentication(11, exchange.server_first(client_first)))
    await writer.drain()
    server_final = exchange.server_final(await _sasl_message(reader))
    if server_final is None:
        # the log says why; the client only learns that the login failed
        reason = (
            "unknown analyst" if analyst is None else "no password" if verifier is None else "wrong password"
        )
        log.warning("login failed for user %s from %s: %s", untrusted(user), peer, reason)
        delay = context.throttle.failed(user, peer)
        raise LoginFailed(f'password authentication failed for user "{user}"', user, delay)
    writer.write(messages.authentication(12, server_final))


async def _sasl_message(reader: asyncio.StreamReader) -> bytes:
    kind, body = await read_message(reader, _MAX_AUTH)
    if kind != b"p":
        raise SqlError(
            sqlstate.PROTOCOL_VIOLATION, f"expected a SASL response, got message {kind!r}", fatal=True
        )
    return body
