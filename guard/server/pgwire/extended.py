"""The extended query protocol: Parse, Bind, Describe, Execute, Close (Sync and Flush
are the session's).

A query runs at most once per portal: a portal Describe of a query runs it and keeps
the answer, which the following Execute sends (so a described and executed query is
one request to the guard, logged once). A statement Describe runs nothing: its
columns come from the query's shape (``describe.py``) with placeholder values of the
right types. Parameter types are the ones the client declares, else the type of the
column the placeholder is compared with, else text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from guard.errors import QueryRejected
from guard.query.parameters import MAX_PARAMETERS, Parameter
from guard.query.parse import parse_within_limits
from guard.server.pgwire import messages, sqlstate
from guard.server.pgwire.answers import GuardPlan, Ticket
from guard.server.pgwire.describe import ResultColumn, dummy_parameters, guard_columns, infer_parameter_types
from guard.server.pgwire.execution import Outcome, Prepared, StatementRunner
from guard.server.pgwire.messages import Bind, Close, Describe, Execute, Parse
from guard.server.pgwire.results import column_formats, data_rows, row_description
from guard.server.pgwire.sqlstate import SqlError
from guard.server.pgwire.statements import split
from guard.server.pgwire.types import PgType, by_name, by_oid
from guard.server.pgwire.values import decode_parameter

__all__ = ["ExtendedProtocol"]

_UNSPECIFIED = (0, 705)  # no type, or "unknown": the server decides


@dataclass
class PreparedStatement:
    prepared: Prepared
    parameter_types: tuple[PgType, ...]
    #: set by a statement Describe: the columns the client was told about
    columns: tuple[ResultColumn, ...] | None = None
    #: the text does not parse, so its placeholders are unknown: Bind takes any number
    #: of values (as text) and the guard rejects the text at Execute, in the log
    unparsed: bool = False
    #: the statement's text, for the log of a Bind the endpoint refuses
    sql: str = ""


@dataclass
class Portal:
    statement: PreparedStatement
    parameters: list[Parameter]
    result_formats: tuple[int, ...]
    outcome: Outcome | None = None
    #: rows already sent by earlier Executes (a row limit suspends the portal)
    sent: int = 0


class ExtendedProtocol:
    """One session's prepared statements and portals."""

    def __init__(
        self, runner: StatementRunner, send: Callable[[bytes], None], ticket: Callable[[], Ticket]
    ) -> None:
        self._runner = runner
        self._send = send
        self._ticket = ticket
        self.statements: dict[str, PreparedStatement] = {}
        self.portals: dict[str, Portal] = {}

    async def parse(self, message: Parse) -> None:
        if message.statement and message.statement in self.statements:
            raise SqlError(
                sqlstate.DUPLICATE_PREPARED_STATEMENT,
                f'prepared statement "{message.statement}" already exists',
            )
        if len(split(message.sql)) > 1:
            raise SqlError(sqlstate.SYNTAX_ERROR, "cannot insert multiple commands into a prepared statement")
        prepared = await self._runner.prepare(message.sql, self._ticket())
        types = await self._parameter_types(prepared, message.sql, message.parameter_types)
        unparsed = False
        if isinstance(prepared.plan, GuardPlan):  # parsing may take a while: off the loop
            answerer, sql = self._runner.answerer, message.sql
            unparsed = not await answerer.call(self._ticket(), lambda: _parses(sql))
        self.statements[message.statement] = PreparedStatement(
            prepared, types, unparsed=unparsed, sql=message.sql
        )
        self._send(messages.PARSE_COMPLETE)

    async def _parameter_types(
        self, prepared: Prepared, sql: str, declared: Sequence[int]
    ) -> tuple[PgType, ...]:
        plan = prepared.plan
        if plan is None:
            return tuple(by_oid(oid) or by_name("text") for oid in declared)
        answerer = self._runner.answerer
        if isinstance(plan, GuardPlan):
            inferred, placeholders = await answerer.call(
                self._ticket(), lambda: (infer_parameter_types(answerer.guard, sql), _guard_placeholders(sql))
            )
            count = max(len(declared), placeholders, max(inferred, default=0))
        else:
            inferred = {}
            count = max(len(declared), _catalog_placeholders(plan.tree))
        types = []
        for position in range(1, count + 1):
            oid = declared[position - 1] if position <= len(declared) else 0
            known = by_oid(oid) if oid not in _UNSPECIFIED else None
            types.append(known or inferred.get(position) or by_name("text"))
        return tuple(types)

    def bind(self, message: Bind) -> None:
        statement = self._statement(message.statement)
        types = list(statement.parameter_types)
        if statement.unparsed and len(message.values) > len(types):
            types += [by_name("text")] * (len(message.values) - len(types))
        if len(message.values) != len(types):
            raise SqlError(
                sqlstate.PROTOCOL_VIOLATION,
                f"bind message supplies {len(message.values)} parameters, but prepared statement "
                f'"{message.statement}" requires {len(types)}',
            )
        formats = column_formats(message.parameter_formats, len(types), "parameters")
        values = [
            decode_parameter(data, pg_type, fmt, position)
            for position, (data, pg_type, fmt) in enumerate(
                zip(message.values, types, formats, strict=True), 1
            )
        ]
        if message.portal and message.portal in self.portals:
            raise SqlError(sqlstate.DUPLICATE_CURSOR, f'portal "{message.portal}" already exists')
        self.portals[message.portal] = Portal(statement, values, message.result_formats)
        self._send(messages.BIND_COMPLETE)

    async def describe(self, message: Describe) -> None:
        if message.kind == b"S":
            statement = self._statement(message.name)
            columns = await self._statement_columns(statement)
            self._send(messages.parameter_description([t.oid for t in statement.parameter_types]))
            self._send_description(columns, ())
            return
        portal = self._portal(message.name)
        columns = await self._portal_columns(portal)
        self._send_description(columns, portal.result_formats)

    async def execute(self, message: Execute) -> None:
        portal = self._portal(message.portal)
        if portal.outcome is None:
            portal.outcome = await self._run(portal)
        outcome = portal.outcome
        if outcome.empty:
            self._send(messages.EMPTY_QUERY_RESPONSE)
            return
        if outcome.columns is None:
            self._send(messages.command_complete(outcome.tag))
            return
        columns = portal.statement.columns if _same_width(portal.statement.columns, outcome.columns) else None
        columns = columns or outcome.columns
        formats = column_formats(portal.result_formats, len(columns))
        end = (
            len(outcome.rows)
            if message.max_rows <= 0
            else min(len(outcome.rows), portal.sent + message.max_rows)
        )
        for row in data_rows(columns, outcome.rows[portal.sent : end], formats):
            self._send(row)
        count, portal.sent = end - portal.sent, end
        if end < len(outcome.rows):
            self._send(messages.PORTAL_SUSPENDED)
        else:
            self._send(messages.command_complete(f"SELECT {count}"))

    def close(self, message: Close) -> None:
        if message.kind == b"S":
            self.statements.pop(message.name, None)
        else:
            self.portals.pop(message.name, None)
        self._send(messages.CLOSE_COMPLETE)

    def deallocate(self, name: str | None) -> None:
        """SQL-level DEALLOCATE of a protocol-level prepared statement (None: all)."""
        if name is None:
            self.statements.clear()
        elif self.statements.pop(name, None) is None:
            raise SqlError(sqlstate.INVALID_PREPARED_STATEMENT, f'prepared statement "{name}" does not exist')

    def end_of_transaction(self) -> None:
        """Portals live until their transaction ends (none are WITH HOLD)."""
        self.portals.clear()

    def forget_unnamed(self) -> None:
        """A simple Query replaces the unnamed statement and portal."""
        self.statements.pop("", None)
        self.portals.pop("", None)

    # --- helpers -------------------------------------------------------------------

    def _statement(self, name: str) -> PreparedStatement:
        statement = self.statements.get(name)
        if statement is None:
            raise SqlError(sqlstate.INVALID_PREPARED_STATEMENT, f'prepared statement "{name}" does not exist')
        return statement

    def _portal(self, name: str) -> Portal:
        portal = self.portals.get(name)
        if portal is None:
            raise SqlError(sqlstate.INVALID_CURSOR_NAME, f'portal "{name}" does not exist')
        return portal

    async def _run(self, portal: Portal) -> Outcome:
        outcome = await self._runner.run(portal.statement.prepared, portal.parameters, self._ticket())
        for message in outcome.messages:
            self._send(message)
        return outcome

    async def _portal_columns(self, portal: Portal) -> tuple[ResultColumn, ...] | None:
        prepared = portal.statement.prepared
        if prepared.plan is None:
            return self._runner.static_columns(prepared)
        if portal.outcome is None:
            portal.outcome = await self._run(portal)  # kept: Execute sends this very answer
        return portal.outcome.columns

    async def _statement_columns(self, statement: PreparedStatement) -> tuple[ResultColumn, ...] | None:
        prepared, runner = statement.prepared, self._runner
        plan = prepared.plan
        if plan is None:
            columns = runner.static_columns(prepared)
        elif isinstance(plan, GuardPlan):
            answerer, sql, flags = runner.answerer, plan.sql, runner.settings.flags
            dummies = dummy_parameters(statement.parameter_types) if statement.parameter_types else None
            columns = await answerer.call(
                self._ticket(), lambda: guard_columns(answerer.guard, runner.analyst, sql, dummies, flags)
            )
        else:
            catalog_plan, count = plan, len(statement.parameter_types)
            answerer = runner.answerer
            try:
                columns = await answerer.call(
                    self._ticket(),
                    lambda: answerer.catalog_columns(runner.analyst, runner.facts, catalog_plan, count),
                )
            except SqlError as error:
                runner.catalog_failed(statement.sql, error)
                raise
        statement.columns = columns
        return columns

    def _send_description(self, columns: Sequence[ResultColumn] | None, requested: Sequence[int]) -> None:
        if columns is None:
            self._send(messages.NO_DATA)
            return
        self._send(row_description(columns, column_formats(requested, len(columns))))


def _same_width(described: Sequence[ResultColumn] | None, actual: Sequence[Any]) -> bool:
    return described is not None and len(described) == len(actual)


def _parses(sql: str) -> bool:
    try:
        parse_within_limits(sql)
    except QueryRejected:
        return False
    return True


def _guard_placeholders(sql: str) -> int:
    try:
        trees = parse_within_limits(sql)
    except QueryRejected:
        return 0  # the guard rejects the text itself, in its own words
    if len(trees) != 1:
        return 0
    tree = trees[0]
    # a placeholder past the protocol's limit is the guard's to reject, never a list to allocate
    numbered = [
        int(text)
        for text in (str(p.this or "") for p in tree.find_all(exp.Placeholder))
        if text.isdigit() and len(text) <= 6 and int(text) <= MAX_PARAMETERS
    ]
    bare = sum(1 for p in tree.find_all(exp.Placeholder) if p.this is None)
    return max([bare, *numbered])


def _catalog_placeholders(tree: exp.Expr) -> int:
    positions = [0]
    for node in tree.find_all(exp.Parameter, exp.Placeholder):
        text = node.this.name if isinstance(node.this, exp.Expr) else str(node.this or "")
        if text.isdigit():
            positions.append(int(text))
    return max(positions)
