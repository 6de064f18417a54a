"""Stages 1-3 in one function: parse, the tables an analyst may see, validate, analyze.

Every caller that needs to know what a SQL text asks goes through :func:`read_query`:
the guard's query path, the PostgreSQL endpoint's Describe (columns before execution)
and the offline audit's replay of a log. One function means one allow-list and one set
of refusal messages, whoever asks: three copies had already started to differ.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.tokenizer_core import Token

from guard.errors import QueryRejected
from guard.policy.model import Analyst, HistoryMode, NoiseMode, Policy, Table
from guard.query.analyze import analyze
from guard.query.listing import Listing, as_count_query, check_listable
from guard.query.parameters import Parameter
from guard.query.parse import DIALECT, check_text, key_of, parse, tokenized, tokens_key
from guard.query.shape import AnyOf, QueryShape
from guard.query.tokenkeys import TokenKeys
from guard.query.validate import validate

__all__ = [
    "DISJUNCTION_REFUSED",
    "MAX_CACHED_LENGTH",
    "MAX_CACHED_TEXTS",
    "FrontCache",
    "FrontResult",
    "Trace",
    "audited_on_rows",
    "read_query",
    "visible_tables",
]

DISJUNCTION_REFUSED = (
    "OR across columns, and NOT of a combined condition or a range, are allowed only where "
    "answers are audited against the history (policy protection.history.audit: exact) or "
    "answered with noise; here, write alternatives of one column as IN (...) and ask other "
    "combinations as separate queries"
)

#: texts a :class:`FrontCache` keeps the reading (and the tokens) of, and the longest
#: text it keeps
MAX_CACHED_TEXTS = 1024
MAX_CACHED_LENGTH = 4096


@dataclass(frozen=True)
class FrontResult:
    """What a SQL text asks: its table (as declared), its shape, and the text to log."""

    table: Table
    shape: QueryShape
    #: the statement with its parameters bound as literals (from the tree), or None when
    #: there were no parameters and the text itself is what was asked
    bound_sql: str | None
    #: a list of a dimension's values, asked as the COUNT(*) query ``shape`` describes
    #: (its count is the last output, never answered): see :mod:`guard.query.listing`
    listing: Listing | None = None

    @property
    def answered_outputs(self) -> int:
        """How many of ``shape.outputs`` the answer has (a listing's count is not one)."""
        return self.listing.columns if self.listing is not None else len(self.shape.outputs)


@dataclass
class Trace:
    """How far a text got through the front stages, for the log of a request that then
    fails: the bound text once parsed, the table once validated."""

    bound_sql: str | None = None
    table: Table | None = None


def visible_tables(policy: Policy, analyst: Analyst | None) -> tuple[Table, ...]:
    """The tables ``analyst`` may query (None: every declared table, for the offline audit
    of a log whose analysts need not be declared). The others do not exist for them."""
    if analyst is None:
        return policy.tables
    return tuple(t for t in policy.tables if analyst.may_query(t.name))


def read_query(
    sql: str,
    policy: Policy,
    analyst: Analyst | None,
    column_types: Callable[[str], Mapping[str, str]],
    parameters: Sequence[Parameter] | None = None,
    trace: Trace | None = None,
    tokens: Sequence[Token] | None = None,
) -> FrontResult:
    """Parse (1), validate against the analyst's visible tables (2), analyze (3).

    ``column_types(table)`` gives the engine's column types of a declared table (read
    after validation, so an undeclared name never reaches the engine); ``trace``, when
    given, is filled as the stages pass, so a caller can log what it knows of a request
    that a later stage rejects; ``tokens``: ``sql``'s tokens, when the caller has them.

    Raises:
        QueryRejected: the text or its shape is not allowed (the message says what to change).
    """
    tree: exp.Expr = parse(sql, policy.limits, parameters, tokens)
    bound = tree.sql(dialect=DIALECT) if parameters is not None else None
    if trace is not None:
        trace.bound_sql = bound
    tree, listing = as_count_query(tree)  # a list of values is asked as its COUNT(*) query
    select, table = validate(tree, visible_tables(policy, analyst))
    if trace is not None:
        trace.table = table
    if listing is not None:
        check_listable(select, listing, table)
    shape = analyze(select, table, column_types(table.name), policy.limits)
    check_disjunctions(policy, table, analyst, shape)
    if listing is not None:
        shape, listing = listing.detach(shape)
    return FrontResult(table, shape, bound, listing)


def check_disjunctions(policy: Policy, table: Table, analyst: Analyst | None, shape: QueryShape) -> None:
    """Reject a WHERE holding a disjunction where answers to ``analyst`` are not judged on
    their rows (:func:`audited_on_rows`). Depends on the analyst, not only on the text:
    :class:`FrontCache` applies it to every reading it hands out.

    Raises:
        QueryRejected: :data:`DISJUNCTION_REFUSED`.
    """
    disjunctive = any(isinstance(c, AnyOf) for c in shape.predicates)
    if disjunctive and not audited_on_rows(policy, table, analyst, shape):
        raise QueryRejected(DISJUNCTION_REFUSED)


def audited_on_rows(policy: Policy, table: Table, analyst: Analyst | None, shape: QueryShape) -> bool:
    """Whether an answer to ``shape`` is judged on the rows it covers, whatever its SQL:
    by the history audit (exact: its query sets are unions of finest cells, so any
    combination of dimension conditions is judged as the rows it selects) or by noise
    (each selection paid for). Only then may WHERE hold a disjunction: without it, OR
    across columns builds trackers that no per-answer rule sees. ``analyst`` None (the
    offline audit of a log): any declared analyst answered that way."""
    if policy.protection.history.audit is HistoryMode.EXACT:
        return True
    analysts = policy.analysts if analyst is None else (analyst,)
    return any(policy.noise_mode(table, a, shape.summed) is NoiseMode.NOISE for a in analysts)


class FrontCache:
    """:func:`read_query` with memory: the reading of a text asked before is kept.

    What the front stages return depends on the text, its parameters, the tables the
    analyst may see and their column types only (never on data or on the history), and
    it is immutable; so the same text from an analyst who sees the same tables is read
    once. The PostgreSQL endpoint reads every query twice (the answer, then its
    columns), and clients send the same texts again and again. Only texts that pass are
    kept (a rejection is read anew each time). Thread-safe.
    """

    def __init__(self, policy: Policy, column_types: Callable[[str], Mapping[str, str]]) -> None:
        self._policy = policy
        self._column_types = column_types
        self._lock = threading.Lock()
        #: (reading, the column types it was read with) by key, least recently used first
        self._found: OrderedDict[Hashable, tuple[FrontResult, Mapping[str, str]]] = OrderedDict()
        #: the tokens of the texts read last (a text read again, or again with another
        #: trailing tag, is not tokenized again: the endpoint reads each text twice)
        keys = TokenKeys(tokens_key, MAX_CACHED_TEXTS, MAX_CACHED_LENGTH)
        self._known, self._remember = keys.known, keys.remember

    def read(
        self,
        sql: str,
        analyst: Analyst,
        parameters: Sequence[Parameter] | None = None,
        trace: Trace | None = None,
    ) -> FrontResult:
        """As :func:`read_query` for ``analyst``.

        Raises:
            QueryRejected: the text or its shape is not allowed (the message says what to change).
        """
        key, tokens = self._key(sql, analyst, parameters)
        if key is None:
            return read_query(sql, self._policy, analyst, self._column_types, parameters, trace)
        with self._lock:
            found = self._found.get(key)
            if found is not None:
                self._found.move_to_end(key)
        if found is not None and self._column_types(found[0].table.name) == found[1]:
            front = found[0]
            if trace is not None:
                trace.bound_sql, trace.table = front.bound_sql, front.table
            # kept per visible tables, but whether a disjunction is allowed is per analyst
            check_disjunctions(self._policy, front.table, analyst, front.shape)
            return front
        front = read_query(sql, self._policy, analyst, self._column_types, parameters, trace, tokens)
        types = dict(self._column_types(front.table.name))
        with self._lock:
            self._found[key] = (front, types)
            while len(self._found) > MAX_CACHED_TEXTS:
                self._found.popitem(last=False)
        return front

    def _key(
        self, sql: str, analyst: Analyst, parameters: Sequence[Parameter] | None
    ) -> tuple[Hashable | None, list[Token] | None]:
        """What the reading of ``sql`` depends on (None: not kept), and ``sql``'s tokens
        when they were read for it (the parser then reads them, not the text again).
        Without parameters, its tokens: the same query with other comments (BI tools tag
        each query they send) or layout reads the same, and the log keeps the text as
        sent. With parameters, the text itself (the bound text that is logged keeps its
        comments).

        Raises:
            QueryRejected: the raw text fails the checks before parsing (its length counts
                its comments).
        """
        check_text(sql, self._policy.limits)
        if len(sql) > MAX_CACHED_LENGTH:
            return None, None
        visible = tuple(t.name for t in visible_tables(self._policy, analyst))
        if parameters is None:
            found, known = self._known(sql)
            tokens = None
            if not found:  # tokenized here, as TokenKeys would, and the tokens kept for the parser
                tokens = tokenized(sql)
                known = None if tokens is None else key_of(tokens)
                self._remember(sql, known)
            return (None if known is None else (known, visible)), tokens
        # typed: 1, 1.0 and True are equal keys in Python, not equal parameters
        key = sql, visible, tuple((type(v), v) for v in parameters)
        try:
            hash(key)
        except TypeError:
            return None, None  # a value that is no parameter (a list): read_query says so
        return key, None
