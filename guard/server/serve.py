"""Both endpoints in one asyncio loop, started together and stopped together.

The HTTP API runs under uvicorn (accepting through
:class:`guard.server.httpconn.HttpListener`), the PostgreSQL endpoint under
:class:`guard.server.pgwire.server.PgServer`; both share one :class:`~guard.core.Guard`
(it is thread-safe), one TLS context, one set of limits and one failed-login throttle.
With TLS, both refuse plaintext (unless ``allow_plaintext_loopback`` and the client is on
loopback). SIGINT / SIGTERM stop both: no new connections, requests in flight finish
(bounded by ``grace`` seconds), then the loop ends and the caller closes the guard. A
second signal stops at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import socket
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from guard.core import Guard
from guard.errors import GuardError
from guard.server.http import create_app
from guard.server.httpconn import Doors, HttpListener
from guard.server.limits import PG_WORKERS, ServeLimits
from guard.server.listen import bind, listen_error
from guard.server.throttle import FailedLoginHook, LoginThrottle, ThrottleSettings, ignore_failed_login

if TYPE_CHECKING:
    from guard.server.pgwire.server import PgServer

__all__ = ["Endpoints", "HttpServer", "freeze_start_up", "http_server", "serve"]


def freeze_start_up() -> None:
    """Leave what is alive once the guard is open and prepared (modules, the policy, the
    prepared audit states: some 115,000 objects) out of the garbage collector's full
    passes. Each pass walked all of it, 60-250 ms inside whichever answer set it off
    (bench_core's first answers at 100,000 rows: 2.4 s of collections in all, 1.7 s
    frozen). These objects live as long as the server; what answers create later is
    collected as before. Called by ``guard serve`` (a process of its own): a library
    caller's process is not frozen behind its back."""
    gc.collect()  # no garbage cycle is frozen in
    gc.freeze()


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Endpoints:
    """What to start. A port of None leaves that endpoint off; 0 takes any free port."""

    host: str = "127.0.0.1"
    http_port: int | None = 8080
    pg_port: int | None = 5433
    tls: ssl.SSLContext | None = None
    #: threads the PostgreSQL endpoint runs queries on (``PgServer``'s default)
    pg_workers: int = PG_WORKERS
    #: seconds requests in flight may take to finish once asked to stop
    grace: int = 10
    #: with TLS: accept plaintext from loopback clients too (others must use TLS)
    allow_plaintext_loopback: bool = False
    limits: ServeLimits = field(default_factory=ServeLimits)
    throttle: ThrottleSettings = field(default_factory=ThrottleSettings)


class HttpServer(uvicorn.Server):
    """uvicorn, accepting through an :class:`HttpListener` (TLS or plaintext, connection
    limit, start-up timeout), without its own signal handling (:func:`serve` stops both
    endpoints). Serve with ``serve(sockets=[one listening socket])``."""

    def __init__(self, config: uvicorn.Config, endpoints: Endpoints, doors: Doors) -> None:
        super().__init__(config)
        self._endpoints = endpoints
        self._doors = doors
        self._listener: HttpListener | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if sockets is None or len(sockets) != 1:
            raise ValueError("serve the HTTP API on exactly one listening socket")
        await self.lifespan.startup()
        config, state, app_state = self.config, self.server_state, self.lifespan.state

        def protocol() -> asyncio.Protocol:
            return H11Protocol(config=config, server_state=state, app_state=app_state)

        endpoints = self._endpoints
        self._listener = HttpListener(
            sockets[0],
            protocol,
            tls=endpoints.tls,
            allow_plaintext_loopback=endpoints.allow_plaintext_loopback,
            max_connections=endpoints.limits.max_connections,
            startup_timeout=endpoints.limits.startup_timeout,
            doors=self._doors,
        )
        self.servers = []
        self.started = True

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self._listener is not None:
            self._listener.close()
        await super().shutdown(sockets)


def http_server(
    guard: Guard,
    endpoints: Endpoints,
    throttle: LoginThrottle | None = None,
    on_failed_login: FailedLoginHook = ignore_failed_login,
) -> HttpServer:
    """The HTTP API over ``guard`` as :func:`serve` runs it (for tests and scripts that
    run it on a thread of their own: ``server.run(sockets=[sock])``)."""
    doors = Doors()
    app = create_app(
        guard,
        limits=endpoints.limits,
        throttle=throttle or LoginThrottle(endpoints.throttle),
        on_failed_login=on_failed_login,
        doors=doors,
    )
    config = uvicorn.Config(
        app,
        lifespan="off",
        log_config=None,  # uvicorn's own handlers would write to stderr from the event loop
        log_level="warning",  # the guard's own log records every request
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=endpoints.grace,
        timeout_keep_alive=max(1, min(5, int(endpoints.limits.idle_timeout))),
    )
    return HttpServer(config, endpoints, doors)


async def serve(
    guard: Guard,
    endpoints: Endpoints,
    ready: Callable[[dict[str, str]], None],
    on_failed_login: FailedLoginHook = ignore_failed_login,
    throttle: LoginThrottle | None = None,
) -> None:
    """Serve ``guard`` until SIGINT or SIGTERM. ``ready`` receives each endpoint's URL
    (by name, ``"http"`` / ``"postgresql"``) once both accept connections.
    ``on_failed_login(endpoint, user, address)`` runs on a worker thread after each failed
    login on either endpoint (default: :meth:`Guard.failed_login`, a query-log row).
    ``throttle``: the one both endpoints share (default: a new
    one with ``endpoints.throttle``); its ``failed_logins`` and ``locked_out_attempts``
    count since start.

    Raises:
        GuardError: an endpoint cannot listen (port in use, address not local, ...) or
            the PostgreSQL endpoint is not available; nothing is left running.
    """
    stop = asyncio.Event()
    throttle = throttle or LoginThrottle(endpoints.throttle)
    if on_failed_login is ignore_failed_login:
        on_failed_login = guard.failed_login  # failed logins are counted in the query log
    http: HttpServer | None = None
    http_task: asyncio.Task[None] | None = None
    pg: PgServer | None = None
    urls: dict[str, str] = {}
    scheme = "https" if endpoints.tls else "http"
    with _signals(stop, lambda: http):
        try:
            if endpoints.http_port is not None:
                sock = bind(endpoints.host, endpoints.http_port, "HTTP", "--http-port")
                http = http_server(guard, endpoints, throttle, on_failed_login)
                http_task = asyncio.create_task(http.serve(sockets=[sock]))
                await _started(http, http_task)
                urls["http"] = f"{scheme}://{_authority(endpoints.host, sock.getsockname()[1])}"
            if endpoints.pg_port is not None:
                pg, database = await _start_pg(guard, endpoints, throttle, on_failed_login)
                urls["postgresql"] = f"postgresql://{_authority(endpoints.host, pg.port)}/{database}"
            ready(urls)
            waiters = [asyncio.create_task(stop.wait())] + ([http_task] if http_task else [])
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            waiters[0].cancel()
        finally:
            # both stop at once, so the whole shutdown takes at most about ``grace``
            if http is not None:
                http.should_exit = True
            stopping = [asyncio.create_task(_close_pg(pg, endpoints.grace))] if pg is not None else []
            await asyncio.gather(*stopping, *([http_task] if http_task is not None else []))


@contextlib.contextmanager
def _signals(stop: asyncio.Event, http: Callable[[], HttpServer | None]) -> Iterator[None]:
    loop = asyncio.get_running_loop()

    def handle() -> None:
        if stop.is_set():  # the second signal: do not wait for requests in flight
            server = http()
            if server is not None:
                server.force_exit = True
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, handle)
    try:
        yield
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def _started(server: uvicorn.Server, task: asyncio.Task[None]) -> None:
    """Wait until uvicorn accepts connections (or failed to)."""
    while not server.started:
        if task.done():
            task.result()  # re-raises what stopped it
            raise GuardError("the HTTP endpoint stopped while starting")
        await asyncio.sleep(0.01)


async def _start_pg(
    guard: Guard, endpoints: Endpoints, throttle: LoginThrottle, on_failed_login: FailedLoginHook
) -> tuple[PgServer, str]:
    """The running PostgreSQL endpoint, and the database name clients connect to."""
    try:
        from guard.server.pgwire.catalog_queries import DATABASE
        from guard.server.pgwire.server import PgServer
    except ImportError:  # pragma: no cover - a partial installation
        raise GuardError(
            "the PostgreSQL endpoint is not available in this installation: serve HTTP only with --no-pg"
        ) from None
    assert endpoints.pg_port is not None
    server = PgServer(
        guard,
        host=endpoints.host,
        port=endpoints.pg_port,
        ssl_context=endpoints.tls,
        workers=endpoints.pg_workers,
        allow_plaintext_loopback=endpoints.allow_plaintext_loopback,
        limits=endpoints.limits,
        throttle=throttle,
        on_failed_login=on_failed_login,
    )
    try:
        await server.start()
    except OSError as exc:
        raise listen_error(exc, endpoints.host, endpoints.pg_port, "PostgreSQL", "--pg-port") from None
    return server, DATABASE


async def _close_pg(pg: PgServer, grace: int) -> None:
    try:
        await asyncio.wait_for(pg.close(), grace)
    except TimeoutError:
        # e.g. a TLS session whose idle client never answers the close_notify: the process
        # is ending, so its connections end with it
        log.warning("the PostgreSQL endpoint did not close within %d s; stopping anyway", grace)


def _authority(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
