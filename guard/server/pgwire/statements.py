"""What a statement is, before anything runs it: session command, query, or nothing.

A simple Query message may hold several statements: :func:`split` cuts them at
top-level semicolons (the tokenizer knows strings, quoted names and dollar quoting).
:func:`classify` reads each statement's leading words. Session commands (SET, SHOW,
RESET, transaction control, DISCARD, DEALLOCATE) are answered by the endpoint itself;
queries go to the router (``route.py``); anything else goes to the guard, which
refuses it with its own message.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from sqlglot import Token, TokenType
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import TokenError

from guard.server.pgwire import sqlstate
from guard.server.pgwire.sqlstate import SqlError

__all__ = ["Kind", "Statement", "classify", "is_blank", "postgres_tokens", "quote_keyword_labels", "split"]


class Kind(Enum):
    EMPTY = "empty"
    SET = "set"
    RESET = "reset"
    SHOW = "show"
    BEGIN = "begin"
    COMMIT = "commit"
    ROLLBACK = "rollback"
    SAVEPOINT = "savepoint"
    RELEASE = "release"
    ROLLBACK_TO = "rollback to"
    DISCARD = "discard"
    DEALLOCATE = "deallocate"
    #: SELECT, WITH, VALUES, TABLE: the router decides who answers
    QUERY = "query"
    #: anything else: the guard refuses it with its own message
    OTHER = "other"


@dataclass(frozen=True)
class Statement:
    text: str
    kind: Kind
    #: the CommandComplete tag of a session command
    tag: str = ""
    #: SET: (name, value) pairs, value None for DEFAULT; SHOW, RESET, DISCARD and
    #: DEALLOCATE: the name (ALL: "all")
    assignments: tuple[tuple[str, str | None], ...] = field(default=())
    name: str = ""


_LEXEME = re.compile(
    r"""\s*(?:'(?P<string>(?:[^']|'')*)'|"(?P<quoted>(?:[^"]|"")*)"|(?P<word>[A-Za-z_][\w$.]*)"""
    r"""|(?P<number>[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)|(?P<symbol>[=,()-]))"""
)
#: texts up to this length have their tokens remembered (``postgres_tokens``)
_REMEMBERED_LENGTH = 4096
_COMMENT = re.compile(r"\s*(?:--[^\n]*(?:\n|$)|/\*.*?\*/)", re.S)


def split(text: str) -> list[str]:
    """The statements of a simple Query, at top-level semicolons; empty ones dropped.

    Text the tokenizer cannot read (an unterminated quote) is one statement: whoever
    answers it reports the error.
    """
    if ";" not in text and not is_blank(text):
        # no semicolon, so no piece to cut, and not blank: one statement whether it
        # tokenizes or not (tokenizing it here, on the event loop, cost ~0.1 ms a query)
        return [text]
    try:
        tokens = postgres_tokens(text)
    except TokenError:
        return [text]
    pieces, start = [], 0
    for token in tokens:
        if token.token_type is TokenType.SEMICOLON:
            pieces.append(text[start : token.start])
            start = token.end + 1
    pieces.append(text[start:])
    return [p for p in pieces if not is_blank(p)]


def postgres_tokens(text: str) -> Sequence[Token]:
    """The PostgreSQL tokens of ``text``, remembered for the last short texts: a
    statement is split here and routed next (``answers.Router``) from the same tokens.

    Raises:
        TokenError: the text does not tokenize (an unterminated quote).
    """
    if len(text) > _REMEMBERED_LENGTH:
        return Postgres().tokenize(text)
    return _remembered_tokens(text)


@functools.lru_cache(maxsize=64)
def _remembered_tokens(text: str) -> tuple[Token, ...]:
    return tuple(Postgres().tokenize(text))


def quote_keyword_labels(text: str) -> str | None:
    """``text`` with key words used as column labels after AS quoted (``AS select`` ->
    ``AS "select"``), as PostgreSQL's grammar allows and sqlglot's parser does not
    (Metabase's privilege query labels columns select, insert, update, delete); None
    when there is none."""
    try:
        tokens = Postgres().tokenize(text)
    except TokenError:
        return None
    pieces, at = [], 0
    for before, token in itertools.pairwise(tokens):
        if before.token_type is TokenType.ALIAS and token.token_type not in _LABEL_TOKENS:
            word = text[token.start : token.end + 1]
            if word.isidentifier():
                pieces.append(text[at : token.start] + '"' + word.lower() + '"')
                at = token.end + 1
    return "".join(pieces) + text[at:] if pieces else None


_LABEL_TOKENS = (TokenType.VAR, TokenType.IDENTIFIER, TokenType.STRING)


def is_blank(text: str) -> bool:
    """Whether ``text`` holds nothing but whitespace and comments (an empty statement,
    which a client may send between semicolons)."""
    return not _strip_comments(text).strip()


def _strip_comments(text: str) -> str:
    while True:
        match = _COMMENT.match(text)
        if match is None:
            return text
        text = text[match.end() :]


def _lex(text: str) -> list[tuple[str, str]]:
    """(kind, text) lexemes: word, quoted (a "name"), string, number or symbol."""
    out: list[tuple[str, str]] = []
    rest = _strip_comments(text).rstrip().rstrip(";")
    at = 0
    while at < len(rest):
        match = _LEXEME.match(rest, at)
        if match is None or match.end() == at:
            out.append(("other", rest[at:].strip()))
            break
        kind = match.lastgroup or "other"
        value = match.group(kind)
        if kind == "string":
            value = value.replace("''", "'")
        elif kind == "quoted":
            value = value.replace('""', '"')
        out.append((kind, value))
        at = match.end()
    return out


def classify(text: str) -> Statement:
    """Read ``text`` (one statement) into a :class:`Statement`.

    Raises:
        SqlError: a session command that is refused (SET ROLE, SET SESSION AUTHORIZATION).
    """
    lexemes = _lex(text)
    if not lexemes:
        return Statement(text, Kind.EMPTY)
    words = [value.upper() if kind == "word" else "" for kind, value in lexemes]
    first = words[0]
    if first in ("SELECT", "WITH", "VALUES", "TABLE") or lexemes[0] == ("symbol", "("):
        return Statement(text, Kind.QUERY)
    if first == "SET":
        return _set(text, lexemes, words)
    if first == "RESET":
        name = lexemes[1][1] if len(lexemes) > 1 else ""
        return Statement(text, Kind.RESET, "RESET", name="all" if name.upper() == "ALL" else name)
    if first == "SHOW":
        return Statement(text, Kind.SHOW, "SHOW", name=_show_name(lexemes[1:]))
    if first in ("DISCARD", "DEALLOCATE") and len(lexemes) > 1:
        # DISCARD ALL | PLANS | ...; DEALLOCATE [PREPARE] name | ALL
        kind, value = lexemes[-1]
        name = "all" if kind == "word" and value.upper() == "ALL" else value
        tag = f"{first} ALL" if name == "all" else first
        if first == "DISCARD":
            tag = f"DISCARD {value.upper()}"
        return Statement(text, Kind[first], tag, name=name)
    return _transaction_or_other(text, words)


def _transaction_or_other(text: str, words: list[str]) -> Statement:
    first = words[0]
    rest = [w for w in words[1:] if w not in ("WORK", "TRANSACTION")]
    if first == "BEGIN" or (first == "START" and words[1:2] == ["TRANSACTION"]):
        return Statement(text, Kind.BEGIN, "BEGIN")
    if first in ("COMMIT", "END") and "PREPARED" not in words:
        return Statement(text, Kind.COMMIT, "COMMIT")
    if first in ("ROLLBACK", "ABORT") and "PREPARED" not in words:
        if rest[:1] == ["TO"]:
            return Statement(text, Kind.ROLLBACK_TO, "ROLLBACK")
        return Statement(text, Kind.ROLLBACK, "ROLLBACK")
    if first == "SAVEPOINT":
        return Statement(text, Kind.SAVEPOINT, "SAVEPOINT")
    if first == "RELEASE":
        return Statement(text, Kind.RELEASE, "RELEASE")
    return Statement(text, Kind.OTHER)


def _show_name(lexemes: list[tuple[str, str]]) -> str:
    words = " ".join(value for _, value in lexemes).upper()
    aliases = {
        "TIME ZONE": "TimeZone",
        "TRANSACTION ISOLATION LEVEL": "transaction_isolation",
        "SESSION AUTHORIZATION": "session_authorization",
        "ALL": "all",
    }
    if words in aliases:
        return aliases[words]
    return lexemes[0][1] if lexemes else ""


def _set(text: str, lexemes: list[tuple[str, str]], words: list[str]) -> Statement:
    at = 1
    if words[at : at + 1] in (["SESSION"], ["LOCAL"]) and words[at + 1 : at + 2] != ["AUTHORIZATION"]:
        at += 1
    head = words[at : at + 3]
    if head[:1] == ["ROLE"] or head[:2] == ["SESSION", "AUTHORIZATION"]:
        raise SqlError(
            sqlstate.INSUFFICIENT_PRIVILEGE,
            "each connection is bound to the analyst who logged in: the role cannot be changed",
        )
    if head[:1] in (["TRANSACTION"], ["CHARACTERISTICS"], ["CONSTRAINTS"]):
        return Statement(text, Kind.SET, "SET", assignments=_transaction_modes(words))
    if head[:2] == ["TIME", "ZONE"]:
        return Statement(text, Kind.SET, "SET", assignments=(("TimeZone", _value(lexemes[at + 2 :])),))
    if head[:1] == ["NAMES"]:
        return Statement(text, Kind.SET, "SET", assignments=(("client_encoding", _value(lexemes[at + 1 :])),))
    if head[:1] == ["SCHEMA"]:
        return Statement(text, Kind.SET, "SET", assignments=(("search_path", _value(lexemes[at + 1 :])),))
    if len(lexemes) < at + 3 or (words[at + 1] != "TO" and lexemes[at + 1] != ("symbol", "=")):
        raise SqlError(sqlstate.SYNTAX_ERROR, "syntax error in SET: write SET name TO value")
    name = lexemes[at][1]
    return Statement(text, Kind.SET, "SET", assignments=((name, _value(lexemes[at + 2 :])),))


def _value(lexemes: list[tuple[str, str]]) -> str | None:
    """A SET value: DEFAULT (None), or the items joined as PostgreSQL shows lists."""
    if len(lexemes) == 1 and lexemes[0][0] == "word" and lexemes[0][1].upper() in ("DEFAULT", "LOCAL"):
        return None
    items: list[str] = []
    current = ""
    for kind, value in lexemes:
        if (kind, value) == ("symbol", ","):
            items.append(current)
            current = ""
        elif kind == "quoted":
            current += f'"{value}"'
        elif kind == "word":
            current += f" {value}" if current else value
        else:
            current += value
    items.append(current)
    return ", ".join(items)


def _transaction_modes(words: list[str]) -> tuple[tuple[str, str | None], ...]:
    joined = " ".join(w for w in words if w)
    match = re.search(
        r"ISOLATION LEVEL (READ UNCOMMITTED|READ COMMITTED|REPEATABLE READ|SERIALIZABLE)", joined
    )
    if match is None:
        return ()
    level = match.group(1).lower()
    if "CHARACTERISTICS" in words:
        return (("default_transaction_isolation", level),)
    return (("transaction_isolation", level),)
