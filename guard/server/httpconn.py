"""Where HTTP connections come in: encrypted or not, how many, and how long a client may
take to send a request.

uvicorn's own accept loop hands a connection to its protocol before anyone can look at
it, so :class:`HttpListener` accepts connections itself and passes each to uvicorn's
HTTP protocol (``loop.connect_accepted_socket``):

- with TLS, the first byte tells a TLS ClientHello (0x16) from plaintext; plaintext gets
  a 400 that says to use https, unless plaintext from loopback clients is allowed and
  the client is one (as pg_hba's ``hostssl`` against ``host``);
- at most ``max_connections`` at once; one more gets a 503 and is closed;
- a connection must deliver a complete request within ``startup_timeout`` seconds of
  connecting, and of its last answer (its :class:`Door`, which the request middleware
  opens and closes): slowloris clients are cut off. uvicorn itself closes kept-alive
  connections idle for ``timeout_keep_alive`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import ssl
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from guard.server.listen import is_loopback

__all__ = ["Door", "Doors", "HttpListener", "canned_response", "error_body"]

log = logging.getLogger(__name__)

_TLS_HANDSHAKE = 0x16
#: bytes of a refused client's request read before answering (so that the answer is not
#: lost to a reset of the connection with unread data)
_REQUEST_HEAD = 16 * 1024


def error_body(status: HTTPStatus, reason: str) -> bytes:
    """The API's error shape for an HTTP-level refusal (no GuardError)."""
    kind = "".join(word.capitalize() for word in status.phrase.split())
    return json.dumps({"status": "error", "error": kind, "reason": reason}).encode()


def canned_response(status: HTTPStatus, reason: str) -> bytes:
    """A complete HTTP/1.1 response in the API's error shape, closing the connection."""
    body = error_body(status, reason)
    head = (
        f"HTTP/1.1 {status.value} {status.phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class Door:
    """One connection's deadline: running while the connection has no request in hand."""

    def __init__(self, transport: asyncio.Transport, timeout: float) -> None:
        self._transport = transport
        self._timeout = timeout
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self.arm()

    def arm(self) -> None:
        """A request is answered (or none came yet): the next must arrive in time."""
        self.disarm()
        self._timer = self._loop.call_later(self._timeout, self._expire)

    def disarm(self) -> None:
        """A request arrived: its time is the guard's, not the client's."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        peer = self._transport.get_extra_info("peername")
        log.info("closing an HTTP connection from %s: no complete request within %g s", peer, self._timeout)
        self._transport.abort()  # close() would wait for a client that does not read


class Doors:
    """The open connections' doors, by client address as the ASGI scope names it."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, int], Door] = {}

    def add(self, client: tuple[str, int], door: Door) -> None:
        self._open[client] = door

    def remove(self, client: tuple[str, int]) -> None:
        door = self._open.pop(client, None)
        if door is not None:
            door.disarm()

    def get(self, client: Any) -> Door | None:
        """The door of ``scope["client"]``, if this listener accepted that connection."""
        if not isinstance(client, list | tuple) or len(client) < 2:
            return None
        return self._open.get((str(client[0]), int(client[1])))


class _Tracked(asyncio.Protocol):
    """uvicorn's protocol, with the connection counted and given a door."""

    def __init__(self, inner: asyncio.Protocol, listener: HttpListener) -> None:
        self._inner = inner
        self._listener = listener
        self._client: tuple[str, int] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self._client = (str(peer[0]), int(peer[1]))
            self._listener.doors.add(self._client, Door(transport, self._listener.startup_timeout))
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._client is not None:
            self._listener.doors.remove(self._client)
        self._listener.connections -= 1
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class _Refusal(asyncio.Protocol):
    """Reads a request head (bounded), answers ``response`` and closes."""

    def __init__(self, response: bytes, timeout: float) -> None:
        self._response = response
        self._timeout = timeout
        self._seen = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        asyncio.get_running_loop().call_later(self._timeout, transport.abort)

    def data_received(self, data: bytes) -> None:
        self._seen = (self._seen + data)[-_REQUEST_HEAD:]
        if b"\r\n\r\n" in self._seen or len(self._seen) >= _REQUEST_HEAD:
            self._answer()

    def eof_received(self) -> bool | None:
        self._answer()
        return None

    def _answer(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(self._response)
            self._transport.close()


class HttpListener:
    """Accepts on ``sock`` and hands each connection to ``protocol()``, within limits.

    ``tls``: serve HTTPS; plaintext is then refused unless ``allow_plaintext_loopback``
    and the client is on loopback.
    """

    def __init__(
        self,
        sock: socket.socket,
        protocol: Callable[[], asyncio.Protocol],
        *,
        tls: ssl.SSLContext | None,
        allow_plaintext_loopback: bool,
        max_connections: int,
        startup_timeout: float,
        doors: Doors,
    ) -> None:
        self._sock = sock
        self._protocol = protocol
        self._tls = tls
        self._allow_plaintext_loopback = allow_plaintext_loopback
        self._max_connections = max_connections
        self.startup_timeout = startup_timeout
        self.doors = doors
        #: connections handed to uvicorn and not yet closed
        self.connections = 0
        self._pending: set[asyncio.Task[None]] = set()
        self._task = asyncio.get_running_loop().create_task(self._accept())

    def close(self) -> None:
        """Stop accepting (connections already accepted are uvicorn's to close)."""
        self._task.cancel()
        for task in self._pending:
            task.cancel()

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(self._sock)
            except OSError as error:  # e.g. out of file descriptors: try again shortly
                log.warning("cannot accept an HTTP connection: %s", error.strerror or type(error).__name__)
                await asyncio.sleep(0.1)
                continue
            task = loop.create_task(self._admit(conn))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _admit(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        try:
            peer = conn.getpeername()
            tls = self._tls
            if tls is not None and not await self._speaks_tls(conn):
                if not (self._allow_plaintext_loopback and is_loopback(str(peer[0]))):
                    reason = "this server speaks HTTPS only: connect with https://"
                    await self._refuse(conn, None, canned_response(HTTPStatus.BAD_REQUEST, reason))
                    return
                tls = None
            if self.connections >= self._max_connections:
                reason = f"the server holds its limit of {self._max_connections} connections: try again later"
                await self._refuse(conn, tls, canned_response(HTTPStatus.SERVICE_UNAVAILABLE, reason))
                return
            self.connections += 1
            try:
                await loop.connect_accepted_socket(
                    lambda: _Tracked(self._protocol(), self),
                    conn,
                    ssl=tls,
                    ssl_handshake_timeout=self.startup_timeout if tls is not None else None,
                )
            except BaseException:
                self.connections -= 1  # the protocol never got the connection
                raise
        except (OSError, TimeoutError, EOFError) as error:
            log.debug("HTTP connection not admitted: %r", error)
            conn.close()
        except asyncio.CancelledError:
            conn.close()
            raise

    async def _speaks_tls(self, conn: socket.socket) -> bool:
        """Whether the client's first byte opens a TLS handshake (waits for it, bounded).

        Raises:
            TimeoutError: nothing came within the start-up timeout.
            EOFError: the client closed before sending anything.
        """
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.startup_timeout):
            while True:
                readable: asyncio.Future[None] = loop.create_future()
                loop.add_reader(conn.fileno(), _set_done, readable)
                try:
                    await readable
                finally:
                    loop.remove_reader(conn.fileno())
                with contextlib.suppress(BlockingIOError, InterruptedError):
                    first = conn.recv(1, socket.MSG_PEEK)
                    if not first:
                        raise EOFError("closed before sending anything")
                    return first[0] == _TLS_HANDSHAKE

    async def _refuse(self, conn: socket.socket, tls: ssl.SSLContext | None, response: bytes) -> None:
        await asyncio.get_running_loop().connect_accepted_socket(
            lambda: _Refusal(response, self.startup_timeout),
            conn,
            ssl=tls,
            ssl_handshake_timeout=self.startup_timeout if tls is not None else None,
        )


def _set_done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
