"""Stage 1: text to one syntax tree, within size limits."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import Token, TokenType

from guard.errors import QueryRejected
from guard.policy.model import Limits
from guard.query.parameters import Parameter, bind_parameters

__all__ = [
    "MAX_NESTING",
    "MAX_TREE_DEPTH",
    "check_text",
    "key_of",
    "parse",
    "parse_within_limits",
    "tokenized",
    "tokens_key",
]

DIALECT = "duckdb"

#: deepest nesting of parentheses accepted: sqlglot's parser recurse through some twenty
#: frames per level, and about 50 levels exhausted Python's stack. Analysts' aggregate
#: queries nest a handful of levels; 32 leaves ample room.
MAX_NESTING = 32
#: deepest syntax tree accepted (a chain of 150 ANDs is 150 deep without a parenthesis):
#: every later stage recurses through a few frames per level
MAX_TREE_DEPTH = 250

# sqlglot logs a warning when it falls back to a generic Command node; the validator
# reports those statements itself, so the warning is only noise on the analyst's console.
logging.getLogger("sqlglot").setLevel(logging.ERROR)


def parse(
    sql: str,
    limits: Limits,
    parameters: Sequence[Parameter] | None = None,
    tokens: Sequence[Token] | None = None,
) -> exp.Expr:
    """Parse exactly one SQL statement, with ``parameters`` bound to its placeholders
    (``parameters.py``); ``tokens``: ``sql``'s tokens (:func:`tokenized`) when the caller
    has them already (the front stages' memory tokenizes a text for its key).

    Raises:
        QueryRejected: empty text, too long, unparsable, several statements, a tree
            larger than ``limits.max_syntax_nodes``, or parameters that do not fit.
    """
    check_text(sql, limits)
    try:
        statements = _parsed(sql, DIALECT, tokens)
    except (ParseError, TokenError) as exc:
        raise QueryRejected(f"cannot parse the query: {_first_line(exc)}") from None
    except RecursionError:
        # nesting without parentheses (NOT NOT NOT ..., unary minus chains) also recurses
        raise QueryRejected(
            "query nests too deeply for the parser (a long chain of NOT or of unary operators): simplify it"
        ) from None
    except QueryRejected:
        raise
    except Exception as exc:  # sqlglot's own faults on odd text (IndexError on SHOW ALL)
        raise QueryRejected(_parser_fault(exc)) from None
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
    if _tree_depth(tree) > MAX_TREE_DEPTH:
        raise QueryRejected(
            f"query's syntax tree is deeper than {MAX_TREE_DEPTH} levels (a long chain of AND/OR or "
            "arithmetic): simplify it, e.g. with IN lists"
        )
    return bind_parameters(tree, parameters)


def check_text(sql: str, limits: Limits) -> None:
    """The checks of the raw text that come before parsing (comments count too).

    Raises:
        QueryRejected: empty, too long, a NUL character or a lone surrogate.
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
        sql.encode("utf-8")
    except UnicodeEncodeError:
        raise QueryRejected(
            "query contains a character that is not valid Unicode (a lone surrogate): remove it"
        ) from None


def tokens_key(sql: str) -> tuple[tuple[TokenType, str], ...] | None:
    """The text's tokens (type and text, in order) without its comments and layout, or
    None when it does not tokenize. The parser reads tokens only (and keeps comments
    aside), so two texts with the same key parse to the same statement."""
    tokens = tokenized(sql)
    return None if tokens is None else key_of(tokens)


def tokenized(sql: str) -> list[Token] | None:
    """The text's tokens in the guard's dialect (what :func:`parse` reads), or None when
    it does not tokenize."""
    try:
        return Dialect.get_or_raise(DIALECT).tokenize(sql)
    except (TokenError, ValueError):
        return None


def key_of(tokens: Sequence[Token]) -> tuple[tuple[TokenType, str], ...]:
    """:func:`tokens_key` of the text ``tokens`` were read from."""
    return tuple((token.token_type, token.text) for token in tokens)


def parse_within_limits(sql: str, dialect: str = DIALECT) -> list[exp.Expr]:
    """Every statement of ``sql`` parsed in ``dialect``, for callers that read a text before
    the guard does (the PostgreSQL endpoint routing catalog probes and typing
    parameters): the same nesting limits as :func:`parse`, so no text can make them
    recurse without bound.

    Raises:
        QueryRejected: too deeply nested, or not parsable.
    """
    try:
        statements = _parsed(sql, dialect)
    except (ParseError, TokenError, ValueError) as exc:
        raise QueryRejected(f"cannot parse the query: {_first_line(exc)}") from None
    except RecursionError:
        raise QueryRejected("query nests too deeply for the parser: simplify it") from None
    except QueryRejected:
        raise
    except Exception as exc:
        raise QueryRejected(_parser_fault(exc)) from None
    for statement in statements:
        if _tree_depth(statement) > MAX_TREE_DEPTH:
            raise QueryRejected(f"query's syntax tree is deeper than {MAX_TREE_DEPTH} levels: simplify it")
    return statements


def _parsed(sql: str, dialect: str, tokens: Sequence[Token] | None = None) -> list[exp.Expr]:
    """The statements of ``sql`` (None statements dropped), its nesting checked first
    on the guard's own dialect's tokens (:func:`_check_nesting`). In that dialect it is
    tokenized once: the check and the parser read the same tokens (tokenizing is a third
    of a small query's parse in pure-Python sqlglot).

    Raises:
        QueryRejected: nested too deeply; and what sqlglot raises.
    """
    reader = Dialect.get_or_raise(dialect)
    if tokens is None:
        tokens = Dialect.get_or_raise(DIALECT).tokenize(sql)
    _check_nesting(tokens)
    if dialect != DIALECT:
        tokens = reader.tokenize(sql)
    return [s for s in reader.parser().parse(list(tokens), sql) if s is not None]


def _check_nesting(tokens: Sequence[Token]) -> None:
    """Reject tokens whose parentheses nest deeper than :data:`MAX_NESTING`, before the
    recursive parser sees them (the tokenizer does not recurse)."""
    depth = 0
    for token in tokens:
        if token.token_type is TokenType.L_PAREN:
            depth += 1
            if depth > MAX_NESTING:
                raise QueryRejected(_too_deep())
        elif token.token_type is TokenType.R_PAREN:
            depth -= 1


def _tree_depth(tree: exp.Expr) -> int:
    """The syntax tree's depth, without recursion (a long chain of AND or + is deep
    without a single parenthesis)."""
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > MAX_TREE_DEPTH:
            break
        stack.extend((child, level + 1) for child in node.iter_expressions())
    return deepest


def _parser_fault(exc: Exception) -> str:
    return (
        f"cannot parse the query: the SQL parser failed on it ({type(exc).__name__}); send one SELECT "
        "statement of aggregates"
    )


def _too_deep() -> str:
    return f"query nests parentheses deeper than {MAX_NESTING} levels: simplify it"


def _first_line(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if errors:
        first = errors[0]
        description = first.get("description", "syntax error")
        return f"{description} near line {first.get('line')}, column {first.get('col')}"
    return str(exc).splitlines()[0]
