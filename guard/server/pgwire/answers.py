"""Who answers a query, off the event loop: the guard (data) or the catalog (metadata).

:func:`route` sends a query that reads a system catalog, or no relation at all, to the
analyst's catalog emulation; everything else to :meth:`Guard.query`. Both are
blocking (DuckDB), so :class:`Answerer` runs them on a thread pool. A
:class:`Ticket` follows each request so that a CancelRequest can stop it while it is
still queued, or discard its answer once it is running.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlglot import TokenType, exp
from sqlglot.errors import TokenError

from guard.core import Guard
from guard.errors import AccessDenied, QueryRejected
from guard.query.front import MAX_CACHED_LENGTH
from guard.query.parameters import Parameter
from guard.query.parse import parse_within_limits
from guard.query.tokenkeys import TokenKeys
from guard.server.pgwire import sqlstate
from guard.server.pgwire.catalog import Catalogs, VisibleTable, visible_tables
from guard.server.pgwire.catalog_queries import certainly_empty, output_names, references_catalog
from guard.server.pgwire.describe import ResultColumn, guard_columns, value_columns
from guard.server.pgwire.sqlstate import SqlError
from guard.server.pgwire.statements import postgres_tokens, quote_keyword_labels
from guard.server.pgwire.translate import SessionFacts, to_duckdb
from guard.server.pgwire.types import by_name

__all__ = ["Answer", "Answerer", "CatalogPlan", "GuardPlan", "Plan", "Router", "Ticket", "route"]

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class GuardPlan:
    sql: str


@dataclass(frozen=True)
class CatalogPlan:
    #: the query, parsed in PostgreSQL's dialect
    tree: exp.Expr


Plan = GuardPlan | CatalogPlan


def route(sql: str) -> Plan:
    """Who answers the query ``sql``. Text that does not parse as PostgreSQL goes to the
    guard, which explains what is wrong with it in its own words."""
    return _route(sql)[0]


def _route(sql: str) -> tuple[Plan, bool]:
    """:func:`route`, and whether its own parse decided it (not a relabelled text)."""
    try:
        trees = parse_within_limits(sql, "postgres")
    except QueryRejected:
        relabelled = quote_keyword_labels(sql)
        try:
            trees = parse_within_limits(relabelled, "postgres") if relabelled else []
        except QueryRejected:
            trees = []
        if not (len(trees) == 1 and isinstance(trees[0], exp.Query) and references_catalog(trees[0])):
            return GuardPlan(sql), False  # the guard says what is wrong with the text as sent
        return CatalogPlan(trees[0]), False
    if len(trees) == 1 and isinstance(trees[0], exp.Query) and references_catalog(trees[0]):
        return CatalogPlan(trees[0]), True
    return GuardPlan(sql), True


class Router:
    """:func:`route` with memory of the queries it sent to the guard, by their PostgreSQL
    tokens (the parser reads tokens only: comments and layout aside, the same query
    routes the same way). Clients send the same queries again and again, each tagged
    differently by some tools; parsing each anew costs as much as answering from
    memory. Catalog queries are parsed anew (their tree is handed on). Thread-safe."""

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._guarded: OrderedDict[Hashable, None] = OrderedDict()
        #: texts tagged differently are not tokenized again (``tokenkeys.py``)
        tokens = TokenKeys(_tokens, size, MAX_CACHED_LENGTH)
        self._tokens, self._tokens_known = tokens.key, tokens.known

    def remembered(self, sql: str) -> GuardPlan | None:
        """The guard's plan for ``sql`` when its tokens are remembered as the guard's,
        else None (then :meth:`route` it): reads memory only, never tokenizes or parses,
        so the event loop can ask it instead of handing the text to a worker."""
        found, key = self._tokens_known(sql)
        with self._lock:
            if found and key is not None and key in self._guarded:
                self._guarded.move_to_end(key)
                return GuardPlan(sql)
        return None

    def route(self, sql: str) -> Plan:
        key = None if len(sql) > MAX_CACHED_LENGTH else self._tokens(sql)
        with self._lock:
            if key is not None and key in self._guarded:
                self._guarded.move_to_end(key)
                return GuardPlan(sql)
        plan, own = _route(sql)
        if key is not None and own and isinstance(plan, GuardPlan):
            with self._lock:
                self._guarded[key] = None
                while len(self._guarded) > self._size:
                    self._guarded.popitem(last=False)
        return plan


def _tokens(sql: str) -> tuple[tuple[TokenType, str], ...] | None:
    """The PostgreSQL tokens of ``sql`` (None: not tokenizable)."""
    try:
        return tuple((token.token_type, token.text) for token in postgres_tokens(sql))
    except (TokenError, ValueError):
        return None


@dataclass
class Answer:
    """Rows with their columns, the command tag and the protection notes."""

    columns: tuple[ResultColumn, ...]
    rows: Sequence[Sequence[Any]]
    notes: list[str] = field(default_factory=list)

    @property
    def tag(self) -> str:
        return f"SELECT {len(self.rows)}"


class Ticket:
    """One request's cancellation state, shared by the event loop and a worker thread."""

    def __init__(self) -> None:
        self.cancelled = False
        self._work: Future[Any] | None = None

    def cancel(self) -> None:
        """Stop the work: still queued, it never starts; running, its result is dropped
        (DuckDB work is not interrupted halfway: the guard's log stays complete)."""
        self.cancelled = True
        if self._work is not None:
            self._work.cancel()  # no effect once it runs

    def track(self, work: Future[Any] | None) -> None:
        """The pool's future of the work in progress (None when it is done)."""
        self._work = work

    def check(self) -> None:
        if self.cancelled:
            raise SqlError(sqlstate.QUERY_CANCELED, "canceling statement due to user request")


class Answerer:
    """The guard, the catalogs, and the thread pool both run on."""

    def __init__(self, guard: Guard, workers: int) -> None:
        self.guard = guard
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pgwire")
        self.router = Router()
        self.catalogs = Catalogs(self._tables_of)

    def _tables_of(self, analyst: str) -> Sequence[VisibleTable]:
        who = self.guard.policy.analyst(analyst)
        if who is None:
            raise AccessDenied(f"unknown analyst {analyst!r}")
        return visible_tables(self.guard.policy, who, lambda t: self.guard.backend.table_info(t).types)

    async def call(self, ticket: Ticket, function: Callable[[], T]) -> T:
        """``function()`` on the pool. A ticket cancelled before it starts never runs;
        one cancelled while it runs has its result discarded.

        Raises:
            SqlError: 57014 when cancelled; whatever ``function`` raises otherwise.
        """

        def guarded() -> T:
            ticket.check()
            return function()

        work = self._pool.submit(guarded)
        ticket.track(work)
        try:
            result = await asyncio.wrap_future(work)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if work.cancelled() and ticket.cancelled and task is not None and not task.cancelling():
                ticket.check()  # our CancelRequest, not the server shutting down
            raise
        finally:
            ticket.track(None)
        ticket.check()
        return result

    # --- the work itself (runs on the pool) -------------------------------------------

    def guard_answer(
        self, analyst: str, sql: str, parameters: Sequence[Parameter] | None, flags: bool = False
    ) -> Answer:
        """The guard's answer; ``flags``: with a flag column after each aggregate column."""
        result = self.guard.query(sql, analyst, parameters)
        if flags:
            result = result.with_flag_columns()
        try:
            columns = guard_columns(self.guard, analyst, sql, parameters, flags)
        except Exception:  # the answer exists: never lose it to a description
            log.exception("could not derive column types from the query shape; reading them off the values")
            columns = ()
        if len(columns) != len(result.columns):
            columns = value_columns(result.columns, result.rows)
        named = tuple(ResultColumn(name, c.type) for name, c in zip(result.columns, columns, strict=True))
        return Answer(named, result.rows, list(result.notes))

    def catalog_answer(
        self, analyst: str, facts: SessionFacts, plan: CatalogPlan, parameters: Sequence[Any]
    ) -> Answer:
        database = self.catalogs.of(analyst)
        names = output_names(plan.tree)
        if names is not None and certainly_empty(plan.tree, database.names):
            return Answer(tuple(ResultColumn(n, by_name("text")) for n in names), [])
        answer = database.run(to_duckdb(plan.tree, database.names, facts), parameters)
        columns = tuple(ResultColumn(n, t) for n, t in zip(answer.columns, answer.types, strict=True))
        return Answer(columns, answer.rows)

    def catalog_columns(
        self, analyst: str, facts: SessionFacts, plan: CatalogPlan, parameter_count: int
    ) -> tuple[ResultColumn, ...]:
        """The columns of a catalog query before its parameters are known: run with
        NULLs (the catalog holds no data, so running is harmless); when that fails,
        the names from the text, typed text."""
        try:
            return self.catalog_answer(analyst, facts, plan, [None] * parameter_count).columns
        except SqlError:
            names = output_names(plan.tree)
            if names is None:
                raise
            return tuple(ResultColumn(n, by_name("text")) for n in names)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.catalogs.close()
