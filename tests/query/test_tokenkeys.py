"""Token keys remembered by a text's untagged head: exact, whatever the head is.

The property that makes the memory sound: two texts that differ only in a trailing tag
tokenize alike (same token types and texts), in the guard's dialect and in
PostgreSQL's, whether the head ends outside any literal, inside a string, a quoted
name, a line comment or an unterminated block comment.
"""

from __future__ import annotations

import sqlglot
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sqlglot.errors import TokenError

from guard.query.parse import tokens_key
from guard.query.tokenkeys import TokenKeys, untagged


def _tokens(sql: str, dialect: str) -> tuple[tuple[object, str], ...] | None:
    try:
        return tuple((t.token_type, t.text) for t in sqlglot.tokenize(sql, read=dialect))
    except (TokenError, ValueError):
        return None


def test_untagged_finds_a_trailing_tag_only() -> None:
    assert untagged("SELECT 1 /* request 7 */") == "SELECT 1 "
    assert untagged("SELECT 1\n/* dashboard: sales, tile=3 */ \n") == "SELECT 1\n"
    for text in (
        "SELECT 1",
        "SELECT 1/* request 7 */",  # no layout before it: a '/' may belong to an operator
        "SELECT 1 /* request 7 */ x",  # not at the end
        "SELECT 1 /*+ hint */",  # an optimizer hint is a token in some dialects
        "SELECT 1 /* it's */",  # a quote could end a string the head opened
        "SELECT 1 /* a * b */",
        "SELECT 1 /* nested /* */",
        "SELECT 1 /* $$ */",
        "SELECT 1 /*   */",  # nothing to gain
        "SELECT 1 /* request 7 */\u2003",  # only ASCII layout after it
        "/* request 7 */",
    ):
        assert untagged(text) is None, text


HEADS = [
    "SELECT major, COUNT(*) FROM students GROUP BY major ",
    "SELECT 'unterminated ",
    'SELECT "unterminated ',
    "SELECT $$ unterminated ",
    "SELECT 1 -- a line comment ",
    "SELECT 1 /* an open comment ",
    "SELECT 1 /* open /* nested ",
    "SELECT 4 / ",
    "SELECT 4 * ",
    "SELECT E'a\\' ",
    "",
    " ",
]
TAG_BODIES = st.text(alphabet="abcXYZ019_ .,:=#@-é", min_size=1, max_size=12).filter(str.strip)


@settings(max_examples=300, deadline=None)
@given(
    head=st.one_of(st.sampled_from(HEADS), st.text(alphabet="SELCT ab1'\"$*/-;\n()", max_size=16)),
    first=TAG_BODIES,
    second=TAG_BODIES,
    after=st.sampled_from(["", " ", "\n", " \t\r\n"]),
)
def test_texts_differing_in_their_tag_tokenize_alike(head: str, first: str, second: str, after: str) -> None:
    one, two = f"{head} /*{first}*/{after}", f"{head}\n/*{second}*/"
    assert untagged(one) is not None and untagged(two) is not None
    heads = (untagged(one)[:-1], untagged(two)[:-1])  # type: ignore[index]
    assert heads[0] == heads[1] == head
    for dialect in ("duckdb", "postgres"):
        assert _tokens(one, dialect) == _tokens(two, dialect), (dialect, one, two)


def test_keys_are_remembered_by_head_and_tagged_texts_apart() -> None:
    calls: list[str] = []

    def tokenize(sql: str) -> object:
        calls.append(sql)
        return tokens_key(sql)

    keys = TokenKeys(tokenize, size=8)
    first = keys.key("SELECT COUNT(*) FROM t /* request 1 */")
    assert keys.key("SELECT COUNT(*) FROM t /* request 2 */") == first
    assert len(calls) == 1  # the second text was not tokenized
    # the head alone is another text: tokenized on its own
    assert keys.key("SELECT COUNT(*) FROM t ") == first
    assert len(calls) == 2
    # untagged texts are remembered by their whole text
    keys.key("SELECT COUNT(*) FROM t")
    keys.key("SELECT COUNT(*) FROM t")
    assert len(calls) == 3
    assert keys.key("SELECT SUM(x) FROM t /* request 3 */") != first


def test_memory_is_bounded_and_long_texts_are_not_kept() -> None:
    keys = TokenKeys(tokens_key, size=4, longest=100)
    for i in range(10):
        keys.key(f"SELECT {i} /* request {i} */")
    assert len(keys._known) == 4
    keys.key("SELECT 1 " + " " * 200)
    assert len(keys._known) == 4


PIECES = ["a", " ", "'", '"', "$", "$$", "*", "/", "+", "\\", "-", "\n", ";", "é", "*/", "/*"]
WIDE = st.one_of(
    st.lists(st.sampled_from(PIECES), max_size=4).map("".join),
    st.text(alphabet="ab1 '\"$*/+\\-\n;é", max_size=8),
)


@settings(max_examples=500, deadline=None)
@given(
    head=st.one_of(st.sampled_from(HEADS), st.text(alphabet="SELCT ab1'\"$*/-;\n()", max_size=16)),
    sep=st.sampled_from(["", " ", "\n", "/", "*", "\u2003"]),
    first=WIDE,
    second=WIDE,
    after=st.sampled_from(["", " ", "\n", "x", "\u2003"]),
)
# the rule's ways to fail, as found when each condition was dropped
@example(head="SELECT 'unterminated ", sep=" ", first="'", second="a", after="")
@example(head='SELECT "unterminated ', sep=" ", first='"', second="a", after="")
@example(head="SELECT $$ unterminated ", sep=" ", first="$$", second="a", after="")
@example(head="SELECT 1 /* an open comment ", sep=" ", first="a*/ b", second="a", after="")
@example(head="SELECT 4 ", sep="/", first="a", second="b", after="")
@example(head="SELECT 4", sep="\u2003", first="a", second="b", after="")
@example(head="SELECT 4 ", sep=" ", first="a", second="b", after="x")
@example(head="SELECT 4 ", sep=" ", first="a", second="b", after="\u2003")
def test_whatever_untagged_accepts_tokenizes_alike(
    head: str, sep: str, first: str, second: str, after: str
) -> None:
    """Texts built to break the rule (no layout before the tag, a body with quotes,
    stars, slashes, '+' or '$', something after it): whenever both are taken as tagged
    with the same head, they tokenize alike."""
    one, two = f"{head}{sep}/*{first}*/{after}", f"{head}{sep}/*{second}*/"
    if untagged(one) is None or untagged(one) != untagged(two):
        return
    for dialect in ("duckdb", "postgres"):
        assert _tokens(one, dialect) == _tokens(two, dialect), (dialect, one, two)
