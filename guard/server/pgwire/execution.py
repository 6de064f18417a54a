"""Running one statement of a session: session commands here, queries on the pool.

The session's transaction status lives here too. The guard is read-only, so a
transaction block only has to be tracked (BEGIN/COMMIT/ROLLBACK answer as PostgreSQL
does, and ReadyForQuery reports I/T/E): after an error inside a block, statements are
refused with 25P02 until ROLLBACK, as clients expect.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from guard.server.pgwire import messages, sqlstate
from guard.server.pgwire.answers import Answerer, CatalogPlan, GuardPlan, Plan, Ticket
from guard.server.pgwire.describe import ResultColumn
from guard.server.pgwire.settings import SessionSettings
from guard.server.pgwire.sqlstate import SqlError
from guard.server.pgwire.statements import Kind, Statement, classify
from guard.server.pgwire.translate import SessionFacts
from guard.server.pgwire.types import by_name
from guard.server.serverlog import untrusted

__all__ = ["IDLE", "IN_BLOCK", "IN_FAILED_BLOCK", "Outcome", "Prepared", "StatementRunner"]

IDLE, IN_BLOCK, IN_FAILED_BLOCK = b"I", b"T", b"E"

log = logging.getLogger(__name__)

_ENDS_FAILED_BLOCK = (Kind.COMMIT, Kind.ROLLBACK, Kind.ROLLBACK_TO)


@dataclass(frozen=True)
class Prepared:
    """A classified statement, and for a query who answers it."""

    statement: Statement
    plan: Plan | None = None


@dataclass
class Outcome:
    """What running a statement produced, ready to be sent."""

    tag: str
    #: None: the statement returns no rows (a command)
    columns: tuple[ResultColumn, ...] | None = None
    rows: Sequence[Sequence[Any]] = field(default_factory=list)
    #: NoticeResponse and ParameterStatus messages, sent before the rows
    messages: list[bytes] = field(default_factory=list)
    #: an empty query string (EmptyQueryResponse instead of CommandComplete)
    empty: bool = False


class StatementRunner:
    """Runs statements for one authenticated analyst."""

    def __init__(
        self, answerer: Answerer, analyst: str, settings: SessionSettings, process_id: int, peer: str = ""
    ) -> None:
        self.answerer = answerer
        self.analyst = analyst
        #: who is asking, as the server log names them
        self.client = f"analyst {analyst!r} at {peer or 'an unknown address'}"
        self.settings = settings
        self.status = IDLE
        self.facts = SessionFacts(analyst, process_id, lambda name: settings.get(name)[1], settings.all)
        #: DEALLOCATE name (None: all): set by whoever keeps the prepared statements
        self.on_deallocate: Callable[[str | None], None] = lambda name: None

    async def prepare(self, text: str, ticket: Ticket) -> Prepared:
        """Classify ``text`` and, for a query, decide who answers it (nothing runs).

        Raises:
            SqlError: a refused session command.
        """
        statement = classify(text)
        if statement.kind in (Kind.QUERY, Kind.OTHER):
            if statement.kind is Kind.OTHER:
                return Prepared(statement, GuardPlan(text))
            router = self.answerer.router
            # a query routed before (by its tokens) is not handed to a worker to be routed
            remembered = router.remembered(text)
            if remembered is not None:
                ticket.check()
                return Prepared(statement, remembered)
            plan = await self.answerer.call(ticket, lambda: router.route(text))
            return Prepared(statement, plan)
        return Prepared(statement)

    def failed(self) -> None:
        """An error happened: an open transaction block is now aborted."""
        if self.status == IN_BLOCK:
            self.status = IN_FAILED_BLOCK

    def static_columns(self, prepared: Prepared) -> tuple[ResultColumn, ...] | None:
        """Columns of a session command (SHOW has one; the others return no rows)."""
        statement = prepared.statement
        if statement.kind is not Kind.SHOW:
            return None
        if statement.name == "all":
            return (ResultColumn("name", by_name("text")), ResultColumn("setting", by_name("text")))
        return (ResultColumn(self.settings.get(statement.name)[0], by_name("text")),)

    async def run(self, prepared: Prepared, parameters: Sequence[Any] | None, ticket: Ticket) -> Outcome:
        """Run ``prepared`` with bound ``parameters``.

        Raises:
            SqlError, GuardError: the statement failed (the caller sends the error).
        """
        statement = prepared.statement
        if self.status == IN_FAILED_BLOCK and statement.kind not in _ENDS_FAILED_BLOCK:
            raise SqlError(
                sqlstate.IN_FAILED_TRANSACTION,
                "current transaction is aborted, commands ignored until end of transaction block",
            )
        plan = prepared.plan
        if isinstance(plan, GuardPlan):
            # no values: None, so that the guard logs the text as sent, not re-generated
            sql, values, flags = plan.sql, list(parameters) if parameters else None, self.settings.flags
            answer = await self.answerer.call(
                ticket, lambda: self.answerer.guard_answer(self.analyst, sql, values, flags)
            )
            notices = [messages.notice_response(note) for note in answer.notes]
            return Outcome(answer.tag, answer.columns, answer.rows, notices)
        if isinstance(plan, CatalogPlan):
            catalog_plan, values = plan, list(parameters or ())
            try:
                answerer = self.answerer
                answer = await answerer.call(
                    ticket, lambda: answerer.catalog_answer(self.analyst, self.facts, catalog_plan, values)
                )
            except SqlError as error:
                self.catalog_failed(statement.text, error)
                raise
            return Outcome(answer.tag, answer.columns, answer.rows)
        return self._command(prepared)

    def catalog_failed(self, text: str, error: SqlError) -> None:
        """Log a catalog query the emulation could not answer: who sent it, and what (a
        query a tool sends that fails here is a gap of the emulation worth seeing)."""
        if error.sqlstate == sqlstate.QUERY_CANCELED:
            return
        log.warning(
            "catalog query of %s failed with %s %s: %s",
            self.client,
            error.sqlstate,
            untrusted(error.message),
            untrusted(text),
        )

    def _command(self, prepared: Prepared) -> Outcome:
        statement = prepared.statement
        kind = statement.kind
        if kind is Kind.EMPTY:
            return Outcome("", empty=True)
        if kind is Kind.SET:
            changes = [self.settings.set(name, value) for name, value in statement.assignments]
            return Outcome("SET", messages=[messages.parameter_status(*c) for c in changes if c])
        if kind is Kind.RESET:
            names = [s for s, _ in self.settings.all()] if statement.name == "all" else [statement.name]
            changes = []
            for name in names:
                try:
                    changes.append(self.settings.set(name, None))
                except SqlError:
                    if statement.name != "all":
                        raise  # RESET ALL skips what cannot change
            return Outcome("RESET", messages=[messages.parameter_status(*c) for c in changes if c])
        if kind is Kind.SHOW:
            rows: list[Sequence[Any]] = (
                [list(pair) for pair in self.settings.all()]
                if statement.name == "all"
                else [[self.settings.get(statement.name)[1]]]
            )
            return Outcome("SHOW", self.static_columns(prepared), rows)
        if kind is Kind.DEALLOCATE:
            self.on_deallocate(None if statement.name == "all" else statement.name)
            return Outcome(statement.tag)
        if kind is Kind.DISCARD:
            if statement.name == "all":  # the session as new: parameters and prepared statements
                reset = self._command(Prepared(Statement(statement.text, Kind.RESET, "RESET", name="all")))
                self.on_deallocate(None)
                return Outcome(statement.tag, messages=reset.messages)
            return Outcome(statement.tag)
        return self._transaction(statement)

    def _transaction(self, statement: Statement) -> Outcome:
        kind, status = statement.kind, self.status
        if kind is Kind.BEGIN:
            self.status = IN_BLOCK if status == IDLE else status
            if status != IDLE:
                return Outcome(
                    "BEGIN",
                    messages=[
                        _warning(sqlstate.ACTIVE_TRANSACTION, "there is already a transaction in progress")
                    ],
                )
            return Outcome("BEGIN")
        if kind in (Kind.COMMIT, Kind.ROLLBACK):
            self.status = IDLE
            tag = "ROLLBACK" if kind is Kind.ROLLBACK or status == IN_FAILED_BLOCK else "COMMIT"
            if status == IDLE:
                return Outcome(
                    tag,
                    messages=[
                        _warning(sqlstate.NO_ACTIVE_TRANSACTION, "there is no transaction in progress")
                    ],
                )
            return Outcome(tag)
        if status == IDLE:
            raise SqlError(
                sqlstate.NO_ACTIVE_TRANSACTION, f"{statement.tag} can only be used in transaction blocks"
            )
        if kind is Kind.ROLLBACK_TO:
            self.status = IN_BLOCK
        return Outcome(statement.tag)


def _warning(code: str, message: str) -> bytes:
    return messages.notice_response(message, severity="WARNING", code=code)
