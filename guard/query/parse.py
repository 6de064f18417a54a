"""Stage 1: text to one syntax tree, within size limits."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from guard.errors import QueryRejected
from guard.policy.model import Limits
from guard.query.parameters import Parameter, bind_parameters

__all__ = ["parse"]

DIALECT = "duckdb"

# sqlglot logs a warning when it falls back to a generic Command node; the validator
# reports those statements itself, so the warning is only noise on the analyst's console.
logging.getLogger("sqlglot").setLevel(logging.ERROR)


def parse(sql: str, limits: Limits, parameters: Sequence[Parameter] | None = None) -> exp.Expr:
    """Parse exactly one SQL statement, with ``parameters`` bound to its placeholders
    (``parameters.py``).

    Raises:
        QueryRejected: empty text, too long, unparsable, several statements, a tree
            larger than ``limits.max_syntax_nodes``, or parameters that do not fit.
    """
    if not isinstance(sql, str) or not sql.strip():
        raise QueryRejected("empty query: send one SELECT statement")
    if len(sql) > limits.max_sql_length:
        raise QueryRejected(
            f"query is {len(sql)} characters long; the limit is {limits.max_sql_length}: send a shorter query"
        )
    if "\x00" in sql:
        raise QueryRejected("query contains a NUL character: remove it")
    try:
        statements = [s for s in sqlglot.parse(sql, read=DIALECT) if s is not None]
    except (ParseError, TokenError) as exc:
        raise QueryRejected(f"cannot parse the query: {_first_line(exc)}") from None
    if not statements:
        raise QueryRejected("empty query: send one SELECT statement")
    if len(statements) > 1:
        raise QueryRejected(
            f"multiple statements ({len(statements)}) are not allowed: send one SELECT at a time"
        )
    tree = statements[0]
    size = sum(1 for _ in tree.walk())
    if size > limits.max_syntax_nodes:
        raise QueryRejected(
            f"query has {size} syntax nodes; the limit is {limits.max_syntax_nodes}: simplify it"
        )
    return bind_parameters(tree, parameters)


def _first_line(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if errors:
        first = errors[0]
        description = first.get("description", "syntax error")
        return f"{description} near line {first.get('line')}, column {first.get('col')}"
    return str(exc).splitlines()[0]
