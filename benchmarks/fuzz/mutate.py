"""A byte-level mutator over valid statements.

A valid statement's UTF-8 bytes get one to eight random edits: insert a random byte or
a SQL token, delete a span, replace a byte, duplicate a span, swap two tokens; then the
bytes are decoded with ``errors="surrogateescape"`` (invalid bytes become lone
surrogates, as a careless client would pass them on) or ``errors="replace"``.
"""

from __future__ import annotations

import random
import re

from hypothesis import strategies as st

from benchmarks.fuzz.grammar import Draw, Fuzzed, below, draw_valid, pick, seeded
from benchmarks.fuzz.schema import Schema

__all__ = ["TOKENS", "mutate", "mutated"]

#: tokens inserted whole: keywords, operators, quotes, comment and string delimiters
TOKENS = tuple(
    t.encode()
    for t in (
        "SELECT",
        "FROM",
        "WHERE",
        "AND",
        "OR",
        "NOT",
        "IN",
        "BETWEEN",
        "GROUP BY",
        "ORDER BY",
        "ROLLUP",
        "CUBE",
        "GROUPING SETS",
        "LIMIT",
        "UNION",
        "JOIN",
        "NULL",
        "COUNT(*)",
        "SUM(",
        "AVG(",
        "(",
        ")",
        "((",
        "))",
        ",",
        ";",
        "'",
        '"',
        "$$",
        "$1",
        "?",
        "--",
        "/*",
        "*/",
        "=",
        "<>",
        "::",
        "||",
        "*",
        ".",
        "[",
        "]",
        "{",
        "}",
        "\\",
        "name",
        "income",
        "students",
        "read_csv('/etc/passwd')",
        "information_schema.tables",
        "1e400",
        "-",
        "\x00",
    )
)

#: bytes that are not UTF-8 (or not on their own): a lone continuation byte, an
#: overlong form, an encoded surrogate, a code point past U+10FFFF
INVALID_UTF8 = b"\xff\xfe\xc3\x28\xe2\x82\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80"

_TOKEN = re.compile(rb"\w+|'[^']*'|\"[^\"]*\"|\S")


def mutate(data: bytes, rng: random.Random, edits: int) -> bytes:
    """``data`` after ``edits`` random edits."""
    buffer = bytearray(data)
    for _ in range(edits):
        op = rng.randrange(7)
        at = rng.randrange(len(buffer) + 1)
        if op == 0:
            buffer[at:at] = bytes([rng.randrange(256)])
        elif op == 1:
            buffer[at:at] = rng.choice(TOKENS)
        elif op == 2 and buffer:
            del buffer[at : at + rng.randint(1, 8)]
        elif op == 3 and at < len(buffer):
            buffer[at] = rng.randrange(256)
        elif op == 4 and buffer:
            start = rng.randrange(len(buffer))
            span = buffer[start : start + rng.randint(1, 16)]
            buffer[at:at] = span * rng.randint(1, 4)
        elif op == 5:
            spans = [m.span() for m in _TOKEN.finditer(bytes(buffer))]
            if len(spans) >= 2:
                (a, b), (c, d) = sorted(rng.sample(spans, 2))
                buffer = buffer[:a] + buffer[c:d] + buffer[b:c] + buffer[a:b] + buffer[d:]
        elif op == 6 and buffer:
            buffer[at:at] = b"\xff\xfe\xc3\x28\xe2\x82\xed\xa0\x80\xf4\x90"[rng.randrange(11) :][
                : rng.randint(1, 4)
            ]
    return bytes(buffer)


@st.composite
def mutated(draw: Draw, sch: Schema) -> Fuzzed:
    base = draw_valid(draw, sch)
    rng = seeded(draw)
    data = mutate(base.sql.encode("utf-8"), rng, 1 + draw(below(8)))
    errors = pick(draw, ["surrogateescape", "replace"])
    return Fuzzed(data.decode("utf-8", errors=errors), base.parameters, "mutated")
