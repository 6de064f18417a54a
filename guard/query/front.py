"""Stages 1-3 in one function: parse, the tables an analyst may see, validate, analyze.

Every caller that needs to know what a SQL text asks goes through :func:`read_query`:
the guard's query path, the PostgreSQL endpoint's Describe (columns before execution)
and the offline audit's replay of a log. One function means one allow-list and one set
of refusal messages, whoever asks: three copies had already started to differ.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp

from guard.errors import QueryRejected
from guard.policy.model import Analyst, HistoryMode, NoiseMode, Policy, Table
from guard.query.analyze import analyze
from guard.query.listing import Listing, as_count_query, check_listable
from guard.query.parameters import Parameter
from guard.query.parse import DIALECT, parse
from guard.query.shape import AnyOf, QueryShape
from guard.query.validate import validate

__all__ = ["DISJUNCTION_REFUSED", "FrontResult", "Trace", "audited_on_rows", "read_query", "visible_tables"]

DISJUNCTION_REFUSED = (
    "OR across columns, and NOT of a combined condition or a range, are allowed only where "
    "answers are audited against the history (policy protection.history.audit: exact) or "
    "answered with noise; here, write alternatives of one column as IN (...) and ask other "
    "combinations as separate queries"
)


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
) -> FrontResult:
    """Parse (1), validate against the analyst's visible tables (2), analyze (3).

    ``column_types(table)`` gives the engine's column types of a declared table (read
    after validation, so an undeclared name never reaches the engine); ``trace``, when
    given, is filled as the stages pass, so a caller can log what it knows of a request
    that a later stage rejects.

    Raises:
        QueryRejected: the text or its shape is not allowed (the message says what to change).
    """
    tree: exp.Expr = parse(sql, policy.limits, parameters)
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
    disjunctive = any(isinstance(c, AnyOf) for c in shape.predicates)
    if disjunctive and not audited_on_rows(policy, table, analyst, shape):
        raise QueryRejected(DISJUNCTION_REFUSED)
    if listing is not None:
        shape, listing = listing.detach(shape)
    return FrontResult(table, shape, bound, listing)


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
