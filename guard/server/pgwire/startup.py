"""A connection's first steps: encryption, cancel requests, start-up and authentication.

Order, as in PostgreSQL: SSLRequest ('S' and a TLS handshake when the server has a
certificate, 'N' otherwise) and GSSENCRequest ('N') may come first; a CancelRequest
is handled and the connection closed; then the StartupMessage, SCRAM-SHA-256 against
the analyst's stored verifier, and only then the database name. Unknown analysts,
analysts without a password and wrong passwords all fail with one message.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from guard.policy.model import Policy
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

__all__ = ["Login", "StartupContext", "start"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StartupContext:
    policy: Policy
    ssl_context: ssl.SSLContext | None
    #: keys the mock SCRAM exchange of unknown users (stable per server)
    mock_secret: bytes
    #: forwards a CancelRequest: (process id, secret key)
    cancel: Callable[[int, int], None]


@dataclass(frozen=True)
class Login:
    """An authenticated session: who, with which parameters."""

    analyst: str
    settings: SessionSettings
    encrypted: bool


async def start(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, context: StartupContext, peer: str
) -> Login | None:
    """Negotiate and authenticate. None when the connection only carried a CancelRequest.

    Raises:
        SqlError: fatal start-up failures (the caller sends them and closes).
    """
    packet, encrypted = await _startup_packet(reader, writer, context)
    if packet.code == CANCEL_REQUEST:
        context.cancel(packet.process_id, packet.secret_key)
        return None
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
    await _authenticate(reader, writer, context, user, peer)
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
        log.warning("login failed for user %r from %s: %s", user, peer, reason)
        raise SqlError(
            sqlstate.INVALID_PASSWORD, f'password authentication failed for user "{user}"', fatal=True
        )
    writer.write(messages.authentication(12, server_final))


async def _sasl_message(reader: asyncio.StreamReader) -> bytes:
    kind, body = await read_message(reader)
    if kind != b"p":
        raise SqlError(
            sqlstate.PROTOCOL_VIOLATION, f"expected a SASL response, got message {kind!r}", fatal=True
        )
    return body
