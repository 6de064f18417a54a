"""One client connection: start-up, then the message loop of protocol v3.

Each connection is bound to the analyst who authenticated; nothing it sends changes
that. Errors become ErrorResponses with their SQLSTATE: the guard's from
:func:`guard.errors.codes_for`, the endpoint's own from ``sqlstate.py``, and anything
unexpected a generic XX000 (the details go to the server log, never to the client).
After an error in the extended protocol, messages are discarded until Sync.

Limits (:class:`~guard.server.limits.ServeLimits`): start-up and login must finish within
``startup_timeout`` seconds (57014), a logged-in session silent for ``idle_timeout``
seconds is closed (57P05), SQL text longer than ``max_sql_length`` is refused before it
is parsed (54000, the session goes on).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from guard.errors import GuardError, QueryRejected, codes_for
from guard.server.limits import ServeLimits
from guard.server.pgwire import messages, sqlstate
from guard.server.pgwire.answers import Answerer, GuardPlan, Ticket
from guard.server.pgwire.execution import IDLE, StatementRunner
from guard.server.pgwire.extended import ExtendedProtocol
from guard.server.pgwire.messages import (
    Bind,
    Close,
    Describe,
    Execute,
    Flush,
    FrontendMessage,
    Parse,
    Query,
    Sync,
    Terminate,
    decode_frontend,
    read_message,
)
from guard.server.pgwire.results import column_formats, data_rows, row_description
from guard.server.pgwire.sqlstate import SqlError
from guard.server.pgwire.startup import LoginFailed, StartupContext, start
from guard.server.pgwire.statements import split
from guard.server.throttle import FailedLoginHook, after_failure

__all__ = ["Session", "SessionServices"]

log = logging.getLogger(__name__)

_INTERNAL = "internal error in the guard's PostgreSQL endpoint (see the server log)"
#: bytes of queued messages that are sent without waiting for the next flush
_SEND_AT = 65_536


@dataclass(frozen=True)
class SessionServices:
    """What a session needs from its server."""

    answerer: Answerer
    startup: StartupContext
    #: registers an analyst's session (for CancelRequests and the per-analyst limit):
    #: returns its (process id, secret key); raises SqlError 53300 over the limit
    register: Callable[[Session, str], tuple[int, int]]
    unregister: Callable[[int], None]
    limits: ServeLimits
    #: the server's failed-login hook, as it is now
    on_failed_login: Callable[[], FailedLoginHook]


class Session:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, services: SessionServices
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.services = services
        self.process_id = 0
        self._ticket: Ticket | None = None
        self._skipping = False
        #: messages not yet sent, and their bytes (``_send``)
        self._out: list[bytes] = []
        self._queued = 0
        peer = writer.get_extra_info("peername")
        #: the client's address (no port), as throttling and the loopback check see it
        self.address = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)

    def cancel(self) -> None:
        """Cancel the request in progress, if any (a CancelRequest on another connection)."""
        if self._ticket is not None:
            self._ticket.cancel()

    async def run(self) -> None:
        limits = self.services.limits
        try:
            try:
                async with asyncio.timeout(limits.startup_timeout):
                    login = await start(self.reader, self.writer, self.services.startup, self.address)
            except TimeoutError:
                timeout = limits.startup_timeout
                log.info("closing a connection from %s: no login within %g s", self.peer, timeout)
                await self._fatal(sqlstate.QUERY_CANCELED, "canceling authentication due to timeout")
                return
            except LoginFailed as failure:
                hook = self.services.on_failed_login()
                await after_failure(failure.delay, hook, "postgresql", failure.user, self.address)
                raise
            if login is None:
                return
            self.process_id, secret = self.services.register(self, login.analyst)
            runner = StatementRunner(
                self.services.answerer, login.analyst, login.settings, self.process_id, self.peer
            )
            extended = ExtendedProtocol(runner, self._send, self._current_ticket)
            runner.on_deallocate = extended.deallocate
            for name, value in login.settings.reported():
                self._send(messages.parameter_status(name, value))
            self._send(messages.backend_key_data(self.process_id, secret))
            self._send(messages.ready_for_query(IDLE))
            await self._flush()
            log.info("analyst %s connected from %s (tls: %s)", login.analyst, self.peer, login.encrypted)
            await self._serve(runner, extended)
        except SqlError as error:
            await self._fatal(error.sqlstate, error.message)
        except asyncio.CancelledError:
            await self._fatal(sqlstate.ADMIN_SHUTDOWN, "terminating connection due to administrator command")
            raise
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError, OSError) as error:
            log.debug("connection from %s ended: %r", self.peer, error)
        except Exception as error:  # a bug: the client hears of it, the details stay in the log
            log.error("unexpected error in the session of %s", self.peer, exc_info=error)
            await self._fatal(sqlstate.INTERNAL_ERROR, _INTERNAL)
        finally:
            if self.process_id:
                self.services.unregister(self.process_id)
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()

    async def _fatal(self, code: str, message: str) -> None:
        with contextlib.suppress(Exception):
            self._send(messages.error_response(code, message, fatal=True))
            # a client that does not read must not hold up the server
            await asyncio.wait_for(self._flush(), timeout=1.0)

    def _current_ticket(self) -> Ticket:
        if self._ticket is None:
            self._ticket = Ticket()
        return self._ticket

    async def _serve(self, runner: StatementRunner, extended: ExtendedProtocol) -> None:
        idle = self.services.limits.idle_timeout
        while True:
            try:
                async with asyncio.timeout(idle):
                    kind, body = await read_message(self.reader)
            except TimeoutError:
                log.info("closing the session of %s: idle for %g s", self.peer, idle)
                raise SqlError(
                    sqlstate.IDLE_SESSION_TIMEOUT,
                    f"terminating connection due to idle-session timeout ({idle:g} s)",
                    fatal=True,
                ) from None
            try:
                message = decode_frontend(kind, body)
            except SqlError as error:
                if error.sqlstate == sqlstate.PROTOCOL_VIOLATION:
                    raise SqlError(error.sqlstate, error.message, fatal=True) from None
                if self._skipping:
                    continue  # after an error, everything up to Sync is discarded
                if kind in (b"Q", b"P") and error.sqlstate == sqlstate.CHARACTER_NOT_IN_REPERTOIRE:
                    text = body.rstrip(b"\x00").decode("utf-8", "backslashreplace")
                    await self._log_rejected(runner, text, error.message)
                self._send_error(error, runner)  # COPY, function calls: refused, connection kept
                if kind in (b"F", b"Q"):  # a cycle of its own: answered, then ready again
                    await self._ready(runner)
                elif kind != b"Q":
                    self._skipping = True
                continue
            if isinstance(message, Terminate):
                return
            if self._skipping and not isinstance(message, Sync):
                continue
            await self._dispatch(message, runner, extended)

    async def _dispatch(
        self, message: FrontendMessage, runner: StatementRunner, extended: ExtendedProtocol
    ) -> None:
        if isinstance(message, Query | Parse) and len(message.sql) > self.services.limits.max_sql_length:
            self._send_error(self._too_long(message.sql), runner)
            if isinstance(message, Query):
                await self._ready(runner)
            else:
                self._skipping = True
        elif isinstance(message, Query):
            extended.forget_unnamed()
            await self._simple_query(message.sql, runner)
            if runner.status == IDLE:
                extended.end_of_transaction()
            await self._ready(runner)
        elif isinstance(message, Sync):
            self._skipping = False
            if runner.status == IDLE:
                extended.end_of_transaction()
            await self._ready(runner)
        elif isinstance(message, Flush):
            await self._flush()
        else:
            try:
                await self._extended_step(message, extended)
            except Exception as error:
                if isinstance(message, Bind) and isinstance(error, SqlError):
                    # values that do not fit the statement: refused here, logged like the guard's
                    statement = extended.statements.get(message.statement)
                    if statement is not None and isinstance(statement.prepared.plan, GuardPlan):
                        await self._log_rejected(runner, statement.sql, error.message)
                self._send_error(error, runner)
                self._skipping = True

    def _too_long(self, sql: str) -> SqlError:
        limit = self.services.limits.max_sql_length
        log.warning("refused %d characters of SQL from %s: over --max-sql-length", len(sql), self.peer)
        return SqlError(
            sqlstate.PROGRAM_LIMIT_EXCEEDED,
            f"statement is {len(sql)} characters long; this server accepts at most {limit} "
            "(guard serve --max-sql-length): send a shorter statement",
        )

    async def _extended_step(self, message: FrontendMessage, extended: ExtendedProtocol) -> None:
        if isinstance(message, Parse):
            await extended.parse(message)
        elif isinstance(message, Bind):
            extended.bind(message)
        elif isinstance(message, Describe):
            await extended.describe(message)
        elif isinstance(message, Execute):
            await extended.execute(message)
        elif isinstance(message, Close):
            extended.close(message)

    async def _ready(self, runner: StatementRunner) -> None:
        self._ticket = None  # a cancel from now on finds nothing running
        self._send(messages.ready_for_query(runner.status))
        await self._flush()

    def _send(self, message: bytes) -> None:
        """Queue ``message`` for the next flush (ReadyForQuery, Flush, a fatal error), as
        PostgreSQL buffers its output: one send per answer, not one per message (each
        costs a system call here and a wake-up in the client). A large answer goes out
        as it grows."""
        self._out.append(message)
        self._queued += len(message)
        if self._queued >= _SEND_AT:
            self._write_out()

    def _write_out(self) -> None:
        if self._out:
            self.writer.write(b"".join(self._out))
            self._out.clear()
            self._queued = 0

    async def _flush(self) -> None:
        self._write_out()
        await self.writer.drain()

    async def _simple_query(self, text: str, runner: StatementRunner) -> None:
        pieces = split(text)
        if not pieces:
            self._send(messages.EMPTY_QUERY_RESPONSE)
            return
        ticket = self._current_ticket()
        for piece in pieces:
            try:
                prepared = await runner.prepare(piece, ticket)
                outcome = await runner.run(prepared, None, ticket)
                for notice in outcome.messages:
                    self._send(notice)
                if outcome.empty:
                    self._send(messages.EMPTY_QUERY_RESPONSE)
                    continue
                if outcome.columns is not None:
                    formats = column_formats((), len(outcome.columns))
                    self._send(row_description(outcome.columns, formats))
                    for row in data_rows(outcome.columns, outcome.rows, formats):
                        self._send(row)
                self._send(messages.command_complete(outcome.tag))
            except Exception as error:
                self._send_error(error, runner)
                return

    async def _log_rejected(self, runner: StatementRunner, text: str, reason: str) -> None:
        """Log a query the endpoint refused before the guard read it (bad input is logged
        too), off the loop."""
        guard = self.services.answerer.guard
        with contextlib.suppress(GuardError):  # the store's failure is the server log's matter
            await asyncio.to_thread(guard.rejected_at_endpoint, runner.analyst, text, QueryRejected(reason))

    def _send_error(self, error: Exception, runner: StatementRunner) -> None:
        runner.failed()
        if isinstance(error, SqlError):
            self._send(messages.error_response(error.sqlstate, error.message, hint=error.hint))
        elif isinstance(error, GuardError):
            self._send(messages.error_response(codes_for(error).sqlstate, error.message))
        else:
            log.error(
                "unexpected error answering %s (session %d)", self.peer, self.process_id, exc_info=error
            )
            self._send(messages.error_response(sqlstate.INTERNAL_ERROR, _INTERNAL))
