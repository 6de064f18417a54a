"""The PostgreSQL endpoint: an asyncio server of protocol v3 sessions over one Guard.

Queries run on a thread pool (``workers`` threads): the guard and DuckDB block, the
event loop never does. :func:`running_pg_server` runs a server on a background
thread's loop, for tests and scripts that are not asynchronous themselves.

Connections are bounded in number (in all, and per analyst) and in time
(:class:`~guard.server.limits.ServeLimits`); failed logins are throttled by a
:class:`~guard.server.throttle.LoginThrottle` that the HTTP API may share.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import secrets
import ssl
import threading
from collections.abc import Iterator
from typing import Any

from guard.core import Guard
from guard.server.limits import PG_WORKERS, ServeLimits
from guard.server.pgwire import sqlstate
from guard.server.pgwire.answers import Answerer
from guard.server.pgwire.session import Session, SessionServices
from guard.server.pgwire.sqlstate import SqlError
from guard.server.pgwire.startup import StartupContext
from guard.server.throttle import FailedLoginHook, LoginThrottle, ignore_failed_login

__all__ = ["PgServer", "running_pg_server"]

log = logging.getLogger(__name__)


class PgServer:
    """Serves ``guard`` to PostgreSQL clients (psql, JDBC, psycopg, SQLAlchemy, ...).

    ``ssl_context``: answer SSLRequest with TLS (else 'N', plain connections only); a
    plaintext start-up is then refused, unless ``allow_plaintext_loopback`` and the client
    is on loopback. ``workers``: threads answering queries at once (:data:`PG_WORKERS`). ``limits`` and
    ``throttle`` default to their safe defaults (a throttle of its own).
    :attr:`on_failed_login` ``("postgresql", user, address)`` runs on a worker thread
    after each failed login (``user`` cut to 200 characters).
    """

    def __init__(
        self,
        guard: Guard,
        *,
        host: str = "127.0.0.1",
        port: int = 5433,
        ssl_context: ssl.SSLContext | None = None,
        workers: int = PG_WORKERS,
        allow_plaintext_loopback: bool = False,
        limits: ServeLimits | None = None,
        throttle: LoginThrottle | None = None,
        on_failed_login: FailedLoginHook = ignore_failed_login,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers={workers}: at least 1 thread is needed")
        self.guard = guard
        self.host = host
        self._requested_port = port
        self._ssl_context = ssl_context
        self._workers = workers
        self._allow_plaintext_loopback = allow_plaintext_loopback
        self.limits = limits or ServeLimits()
        self.throttle = throttle or LoginThrottle()
        self.on_failed_login = on_failed_login
        self._server: asyncio.Server | None = None
        self._answerer: Answerer | None = None
        #: process id -> (session, secret key, analyst)
        self._sessions: dict[int, tuple[Session, int, str]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        """Bind and start accepting (``port=0`` picks a free port, see :attr:`port`).

        Raises:
            OSError: the address cannot be bound.
        """
        if self._server is not None:
            raise RuntimeError("the server is already started")
        self._answerer = Answerer(self.guard, self._workers)
        services = SessionServices(
            answerer=self._answerer,
            startup=StartupContext(
                self.guard.policy,
                self._ssl_context,
                secrets.token_bytes(32),
                self._cancel,
                self.throttle,
                self._allow_plaintext_loopback,
                self._full,
            ),
            register=self._register,
            unregister=self._unregister,
            limits=self.limits,
            on_failed_login=lambda: self.on_failed_login,
        )

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            self._tasks.add(task)
            try:
                await Session(reader, writer, services).run()
            finally:
                self._tasks.discard(task)

        try:
            self._server = await asyncio.start_server(serve, self.host, self._requested_port)
        except BaseException:
            self._answerer.close()
            self._answerer = None
            raise
        log.info(
            "PostgreSQL endpoint listening on %s:%d (tls: %s)", self.host, self.port, bool(self._ssl_context)
        )

    @property
    def port(self) -> int:
        """The bound port."""
        if self._server is None or not self._server.sockets:
            raise RuntimeError("the server is not started")
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop accepting, end every session (FATAL 57P01), wait for running queries."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if server is not None:
            await server.wait_closed()
        answerer, self._answerer = self._answerer, None
        if answerer is not None:
            await asyncio.to_thread(answerer.close)

    def _full(self) -> str | None:
        """Why one more session cannot start (every connection counts, logged in or not)."""
        limit = self.limits.max_connections
        if len(self._tasks) <= limit:
            return None
        return f"sorry, too many clients already: the server holds its limit of {limit} connections"

    def _register(self, session: Session, analyst: str) -> tuple[int, int]:
        limit = self.limits.max_connections_per_analyst
        if sum(1 for _, _, name in self._sessions.values() if name == analyst) >= limit:
            raise SqlError(
                sqlstate.TOO_MANY_CONNECTIONS,
                f'too many connections for analyst "{analyst}": the limit is {limit} '
                "(guard serve --max-connections-per-analyst); close another session",
                fatal=True,
            )
        while True:
            process_id = secrets.randbelow(2**31 - 1) + 1
            if process_id not in self._sessions:
                break
        secret = secrets.randbits(32) - 2**31
        self._sessions[process_id] = (session, secret, analyst)
        return process_id, secret

    def _unregister(self, process_id: int) -> None:
        self._sessions.pop(process_id, None)

    def _cancel(self, process_id: int, secret: int) -> None:
        entry = self._sessions.get(process_id)
        key = secret.to_bytes(4, "big", signed=True)
        if entry is not None and hmac.compare_digest(entry[1].to_bytes(4, "big", signed=True), key):
            log.info("cancel request for session %d", process_id)
            entry[0].cancel()
        else:
            log.warning("cancel request for an unknown session or with a wrong key: ignored")


@contextlib.contextmanager
def running_pg_server(guard: Guard, **options: Any) -> Iterator[PgServer]:
    """A started :class:`PgServer` on a background thread's event loop; closed on exit.

    ``options`` are :class:`PgServer`'s (host, port, ssl_context, workers, limits, ...);
    ``port=0`` picks a free port.
    """
    server = PgServer(guard, **options)
    loop = asyncio.new_event_loop()
    started = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(server.start())
        except BaseException as error:
            failure.append(error)
            started.set()
            loop.close()
            return
        started.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    thread = threading.Thread(target=run, name="pgwire-loop", daemon=True)
    thread.start()
    started.wait()
    if failure:
        thread.join()
        raise failure[0]
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(timeout=60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=60)
