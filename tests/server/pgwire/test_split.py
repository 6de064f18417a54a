"""Splitting a simple Query into statements: a text without a semicolon is not
tokenized on the event loop, and is cut exactly as the tokenizer would cut it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import TokenType
from sqlglot.errors import TokenError

from guard.server.pgwire import statements
from guard.server.pgwire.statements import split


def _split_by_tokens(text: str) -> list[str]:
    """The cut by the tokenizer alone (what ``split`` did for every text)."""
    try:
        tokens = statements.Postgres().tokenize(text)
    except TokenError:
        return [text]
    pieces, start = [], 0
    for token in tokens:
        if token.token_type is TokenType.SEMICOLON:
            pieces.append(text[start : token.start])
            start = token.end + 1
    pieces.append(text[start:])
    return [p for p in pieces if not statements.is_blank(p)]


@pytest.mark.parametrize(
    "text",
    [
        "SELECT 1",
        "SELECT 1 /* request 4 */",
        "",
        "   ",
        "-- only a comment",
        "/* only */ /* comments */",
        "/* a /* nested, unterminated */",  # blank to a regex, an error to the tokenizer
        "/* unterminated",
        "SELECT 'unterminated",
        "SELECT 1; SELECT 2",
        "SELECT ';'",
        "SELECT 1;",
    ],
)
def test_split_cuts_as_the_tokenizer(text: str) -> None:
    assert split(text) == _split_by_tokens(text)


def test_a_text_without_semicolon_is_not_tokenized(monkeypatch: pytest.MonkeyPatch) -> None:
    def tokenize(_: str) -> None:
        raise AssertionError("tokenized")

    monkeypatch.setattr(statements, "postgres_tokens", tokenize)
    assert split("SELECT major, COUNT(*) FROM students GROUP BY major /* request 7 */") == [
        "SELECT major, COUNT(*) FROM students GROUP BY major /* request 7 */"
    ]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="SELCT 1'\"$*/-\n", max_size=20))
def test_texts_without_semicolons_split_as_before(text: str) -> None:
    assert split(text) == _split_by_tokens(text)
