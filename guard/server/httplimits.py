"""The HTTP API's request limits, as ASGI middleware in front of the app.

A request body is read here, whole, before the app sees it: a ``Content-Length`` over
``max_body_bytes`` is refused (413) without reading a byte of the body, a chunked body is
cut off at the limit, and a body that takes longer than ``body_timeout`` seconds to
arrive is refused (408). Both refusals close the connection (its unread rest cannot be
skipped). The connection's :class:`~guard.server.httpconn.Door` is told when a request
starts and when it is answered.
"""

from __future__ import annotations

import asyncio
from http import HTTPStatus

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from guard.server.httpconn import Doors, error_body

__all__ = ["RequestLimits"]


class _TooLarge(Exception):
    pass


class RequestLimits:
    """Bounds the size of request bodies and the time they take to arrive."""

    def __init__(
        self, app: ASGIApp, *, max_body_bytes: int, body_timeout: float, doors: Doors | None = None
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout
        self.doors = doors

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        door = self.doors.get(scope.get("client")) if self.doors is not None else None
        if door is not None:
            door.disarm()
        try:
            await self._handle(scope, receive, send)
        finally:
            if door is not None:
                door.arm()

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.max_body_bytes
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            reason = (
                f"the request body is {declared} bytes; this server accepts at most {limit} "
                "(guard serve --max-body-bytes)"
            )
            await _refuse(send, HTTPStatus.REQUEST_ENTITY_TOO_LARGE, reason)
            return
        try:
            async with asyncio.timeout(self.body_timeout):
                body = await _read_body(receive, limit)
        except _TooLarge:
            reason = (
                f"the request body is larger than {limit} bytes, the most this server accepts "
                "(guard serve --max-body-bytes)"
            )
            await _refuse(send, HTTPStatus.REQUEST_ENTITY_TOO_LARGE, reason)
            return
        except TimeoutError:
            reason = (
                f"the request body did not arrive within {self.body_timeout:g} s "
                "(guard serve --startup-timeout)"
            )
            await _refuse(send, HTTPStatus.REQUEST_TIMEOUT, reason)
            return
        if body is None:  # the client went away
            return
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole body (None if the client disconnected).

    Raises:
        _TooLarge: it grew past ``limit`` bytes (the rest is not read).
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _refuse(send: Send, status: HTTPStatus, reason: str) -> None:
    body = error_body(status, reason)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status.value, "headers": headers})
    await send({"type": "http.response.body", "body": body})
