"""Near-valid statements: one step off what the guard accepts, or far past its limits.

Typos, unknown and forbidden columns, measures in WHERE, subqueries, set operations,
functions, comments, odd literals, parentheses nested up to 5,000 levels, long AND and
OR chains, huge IN lists, unicode (lone surrogates, NUL, bidi and zero-width characters,
homoglyphs), very long strings and placeholder mistakes.
"""

from __future__ import annotations

import random
import re

from hypothesis import strategies as st

from benchmarks.fuzz.grammar import (
    Draw,
    Fuzzed,
    Params,
    below,
    draw_valid,
    literal,
    one_in,
    pick,
    seeded,
    sql_string,
)
from benchmarks.fuzz.schema import Schema

__all__ = ["DEPTHS", "ODD_CHARACTERS", "ODD_LITERALS", "near_valid"]

#: nesting depths: the guard's limit is 32; the issue saw RecursionError from about 50
DEPTHS = (2, 10, 31, 32, 33, 40, 50, 64, 100, 200, 500, 1000, 2000, 5000)

ODD_LITERALS = (
    "1e400",
    "-1e400",
    "1.5e-400",
    "-0",
    "0.0",
    "00001980",
    "1_980",
    "0x7BC",
    "0b1",
    "1980.",
    ".5",
    "1e",
    "9" * 400,
    "-" + "9" * 40,
    "NULL",
    "TRUE",
    "FALSE",
    "DEFAULT",
    "''",
    "'''",
    "E'\\n'",
    "E'\\x00'",
    "E'\\u0000'",
    "U&'\\0041'",
    "B'101'",
    "X'FF'",
    "'\\'",
    "'1980'::INT",
    "CAST('1980' AS INTEGER)",
    "DATE '1980-01-01'",
    "TIMESTAMP '1980-01-01 00:00'",
    "INTERVAL '1 day'",
    "'NaN'::DOUBLE",
    "'inf'::FLOAT",
    "[1, 2]",
    "{'a': 1}",
    "$$CS$$",
    "$tag$CS$tag$",
    "$$",
    "?",
    ":x",
    "@x",
    "$0",
    "$99999999999999999999",
    "'\u00a0EE'",
)

#: lengths of AND/OR chains and IN lists (the policy allows 1,000 IN values)
SIZES = (10, 100, 500, 999, 1000, 1001, 2000, 3000, 5000)

#: what very long text is made of
BLOB_CHARACTERS = ("x", "'", "\u00e9", "\U0001f600", " ", "\ud800", "(")

#: characters the SQL text may carry: lone surrogates, NUL, controls, bidi overrides,
#: zero-width and non-breaking spaces, fullwidth and homoglyph letters, combining marks
ODD_CHARACTERS = (
    "\ud800",
    "\udfff",
    "\udc80",
    "\udcff",
    "\x00",
    "\x01",
    "\x1b",
    "\x7f",
    "\u0085",
    "\u2028",
    "\u2029",
    "\u202e",
    "\u2066",
    "\u200b",
    "\u200d",
    "\ufeff",
    "\u00a0",
    "\u3000",
    "\uff33",
    "\u0421",
    "\u0415",
    "\u0301",
    "\U0001f600",
    "\U0010ffff",
    "\ufffd",
    "\uffff",
    "\\",
    "'",
    '"',
    "`",
    ";",
    "$",
    "%",
    "\t",
    "\r",
    "\n",
)

#: any code point, surrogates included
CHARACTERS = st.characters(codec=None, exclude_categories=())

_WORD = re.compile(r"[A-Za-z_]+")


def _typo(rng: random.Random, word: str) -> str:
    at = rng.randrange(len(word))
    how = rng.randrange(4)
    if how == 0:
        return word[:at] + word[at + 1 :]
    if how == 1:
        return word[:at] + rng.choice("aeioxz_") + word[at:]
    if how == 2 and len(word) > 1:
        at = min(at, len(word) - 2)
        return word[:at] + word[at + 1] + word[at] + word[at + 2 :]
    return word[:at] + rng.choice("aeioxz") + word[at + 1 :]


@st.composite
def typo(draw: Draw, sch: Schema) -> Fuzzed:
    """A valid statement with one word misspelt (a keyword, a table or a column)."""
    base = draw_valid(draw, sch)
    rng = seeded(draw)
    match = rng.choice(list(_WORD.finditer(base.sql)))
    start, end = match.span()
    return Fuzzed(base.sql[:start] + _typo(rng, match.group()) + base.sql[end:], base.parameters, "near")


@st.composite
def wrong_column(draw: Draw, sch: Schema) -> Fuzzed:
    """A column that is unknown, identifies people, or is a measure where only
    dimensions go; or a table the policy does not declare."""
    dim = pick(draw, list(sch.dimensions))
    measure = pick(draw, list(sch.measures))
    ident = pick(draw, list(sch.identifiers))
    unknown = pick(draw, ["majr", "salary", "town", "rowid", "_uid", "ctid", "oid", "x"])
    t = sch.table
    forms = [
        f"SELECT COUNT(*) FROM {t} WHERE {measure} = 50000",
        f"SELECT COUNT(*) FROM {t} WHERE {measure} BETWEEN 49000 AND 51000",
        f"SELECT COUNT(*) FROM {t} WHERE {measure} > 0 AND {dim} IS NOT NULL",
        f"SELECT {measure}, COUNT(*) FROM {t} GROUP BY {measure}",
        f"SELECT {dim}, COUNT(*) FROM {t} GROUP BY {dim} ORDER BY {measure}",
        f"SELECT {ident}, COUNT(*) FROM {t} GROUP BY {ident}",
        f"SELECT COUNT(*) FROM {t} WHERE {ident} = 'Baker'",
        f"SELECT COUNT({ident}) FROM {t}",
        f"SELECT MAX({measure}) FROM {t}",
        f"SELECT MIN({measure}), {dim} FROM {t} GROUP BY {dim}",
        f"SELECT SUM({dim}) FROM {t}",
        f"SELECT COUNT({unknown}) FROM {t}",
        f"SELECT COUNT(*) FROM {t} WHERE {unknown} = 1",
        f"SELECT COUNT(*) FROM {t} GROUP BY {unknown}",
        f"SELECT COUNT(*) FROM {t}s",
        "SELECT COUNT(*) FROM castro WHERE municipality = 'M1'",
        "SELECT AVG(income) FROM hospital WHERE town = 'Enfield'",
        f"SELECT COUNT(*) FROM main.{t}",
        f"SELECT COUNT(x.{dim}) FROM {t} AS s",
        f"SELECT {dim} FROM {t}",
        f"SELECT * FROM {t}",
        f"SELECT {t}.*, COUNT(*) FROM {t}",
        f"SELECT COUNT(DISTINCT {dim}) FROM {t}",
        f"SELECT AVG(DISTINCT {measure}) FROM {t}",
        f"SELECT MEDIAN({measure}) FROM {t}",
        f"SELECT {dim}, GROUPING({measure}), COUNT(*) FROM {t} GROUP BY ROLLUP ({dim})",
        f"SELECT COUNT(*) FROM {t} GROUP BY 2",
        f"SELECT COUNT(*) AS n FROM {t} GROUP BY n",
        f'SELECT COUNT("{dim.upper()}") FROM {t}',
        f'SELECT COUNT(*) FROM "{t.upper()}"',
    ]
    return Fuzzed(pick(draw, forms), None, "near")


@st.composite
def structure(draw: Draw, sch: Schema) -> Fuzzed:
    """Subqueries, set operations, joins, CTEs, HAVING, windows, functions."""
    dim = pick(draw, list(sch.dimensions))
    measure = pick(draw, list(sch.measures))
    value = literal(draw, sch, dim)
    t = sch.table
    forms = [
        f"SELECT COUNT(*) FROM (SELECT * FROM {t})",
        f"SELECT COUNT(*) FROM (SELECT * FROM {t} WHERE {dim} = {value}) AS x",
        f"SELECT COUNT(*) FROM {t} WHERE {dim} IN (SELECT {dim} FROM {t} WHERE {measure} > 60000)",
        f"SELECT COUNT(*), (SELECT SUM({measure}) FROM {t}) FROM {t}",
        f"SELECT COUNT(*) FROM {t} WHERE EXISTS (SELECT 1 FROM {t} WHERE {measure} > 75000)",
        f"SELECT COUNT(*) FROM {t} WHERE {dim} = (SELECT {dim} FROM {t} LIMIT 1)",
        f"WITH x AS (SELECT * FROM {t}) SELECT COUNT(*) FROM x",
        f"WITH {t} AS (SELECT 1 AS {dim}) SELECT COUNT(*) FROM {t}",
        f"SELECT COUNT(*) FROM {t} WHERE {dim} = {value} UNION SELECT COUNT(*) FROM {t}",
        f"SELECT SUM({measure}) FROM {t} UNION ALL SELECT SUM({measure}) FROM {t} WHERE {dim} = {value}",
        f"SELECT COUNT(*) FROM {t} INTERSECT SELECT COUNT(*) FROM {t}",
        f"SELECT COUNT(*) FROM {t} EXCEPT SELECT 9",
        f"SELECT COUNT(*) FROM {t} a JOIN {t} b ON a.{dim} = b.{dim}",
        f"SELECT COUNT(*) FROM {t}, {t} AS b",
        f"SELECT {dim}, COUNT(*) FROM {t} GROUP BY {dim} HAVING SUM({measure}) > 100000",
        f"SELECT DISTINCT {dim} FROM {t}",
        f"SELECT SUM({measure}) OVER (PARTITION BY {dim}) FROM {t}",
        f"SELECT COUNT(*) FILTER (WHERE {dim} = {value}) FROM {t}",
        f"SELECT SUM(CASE WHEN {dim} = {value} THEN {measure} END) FROM {t}",
        f"SELECT SUM({measure}) / COUNT(*) FROM {t}",
        f"SELECT SUM({measure} + 0) FROM {t}",
        f"SELECT COALESCE(SUM({measure}), 0) FROM {t}",
        f"SELECT COUNT(*) FROM {t} WHERE lower({dim}::VARCHAR) = {value}",
        f"SELECT COUNT(*) FROM {t} WHERE {dim} LIKE 'E%'",
        f"SELECT COUNT(*) FROM {t} WHERE {dim} = {value} OR {dim} <> {value}",
        f"SELECT COUNT(*) FROM {t} WHERE NOT {dim} = {value}",
        f"SELECT COUNT(*) FROM {t} WHERE {dim} NOT IN ({value})",
        f"SELECT COUNT(*) FROM {t} WHERE 1 = 1",
        f"SELECT COUNT(*) FROM {t} WHERE {dim} = {dim}",
        f"SELECT COUNT(*) FROM {t} GROUP BY lower({dim}::VARCHAR)",
        f"SELECT {dim} || 'x', COUNT(*) FROM {t} GROUP BY ALL",
        f"SELECT COUNT(*) FROM {t} LIMIT (SELECT 1)",
        f"SELECT COUNT(*) FROM {t} LIMIT -1",
        f"SELECT COUNT(*) FROM {t} LIMIT 1e30",
        f"SELECT COUNT(*) FROM {t} OFFSET 99999999999999999999",
        f"SELECT COUNT(*) FROM {t} USING SAMPLE 50%",
        f"SELECT COUNT(*) FROM {t} ORDER BY random()",
        f"SELECT {dim}, COUNT(*) FROM {t} GROUP BY {dim} WITH ROLLUP",
        f"SELECT COUNT(*) FROM {t} GROUP BY GROUPING SETS (({dim}), ())",
        f"FROM {t} SELECT COUNT(*)",
        f"FROM {t}",
        f"TABLE {t}",
        "VALUES (1)",
        "SELECT 1",
        "SELECT",
        "",
        ";",
        " ",
        "-- only a comment",
        "/* only a comment */",
    ]
    return Fuzzed(pick(draw, forms), None, "near")


@st.composite
def comments(draw: Draw, sch: Schema) -> Fuzzed:
    """Comments between tokens, nested, unterminated, or hiding the rest of the query."""
    base = draw_valid(draw, sch)
    rng = seeded(draw)
    pieces = base.sql.split(" ")
    for _ in range(1 + draw(below(3))):
        at = rng.randrange(len(pieces) + 1)
        pieces.insert(
            at,
            rng.choice(
                ["/**/", "/* x */", "/* /* nested */ */", "--\n", "-- x\n", "/*", "*/", "--", "/*!50000*/"]
            ),
        )
    return Fuzzed(" ".join(pieces), base.parameters, "near")


@st.composite
def odd_literal(draw: Draw, sch: Schema) -> Fuzzed:
    """A dimension compared with a literal of an odd form, type or size."""
    dim = pick(draw, list(sch.dimensions))
    odd = pick(draw, ODD_LITERALS)
    op = pick(draw, ["=", "<>", "<", ">=", "IN", "BETWEEN"])
    right = f"({odd})" if op == "IN" else f"{odd} AND {odd}" if op == "BETWEEN" else odd
    where = f"{dim} {op} {right}"
    form = draw(below(4))
    t = sch.table
    if form == 0:
        return Fuzzed(f"SELECT COUNT(*) FROM {t} WHERE {where}", None, "near")
    if form == 1:
        return Fuzzed(f"SELECT {dim}, COUNT(*) FROM {t} WHERE {where} GROUP BY {dim}", None, "near")
    if form == 2:
        return Fuzzed(f"SELECT COUNT(*) FROM {t} LIMIT {odd}", None, "near")
    return Fuzzed(f"SELECT COUNT(*) FROM {t} GROUP BY {odd}", None, "near")


@st.composite
def nesting(draw: Draw, sch: Schema) -> Fuzzed:
    """Parentheses (or NOTs, unary minus, function calls, subqueries) nested deep."""
    depth = pick(draw, DEPTHS) if one_in(draw, 2) else 1 + draw(below(80))
    dim = next(iter(sch.dimensions))
    value = literal(draw, sch, dim)
    measure = next(iter(sch.measures))
    t = sch.table
    form = draw(below(10))
    o, c = "(" * depth, ")" * depth
    if form == 0:
        sql = f"SELECT COUNT(*) FROM {t} WHERE {dim} = {o}{value}{c}"
    elif form == 1:
        sql = f"SELECT COUNT(*) FROM {t} WHERE {o}{dim} = {value}{c}"
    elif form == 2:
        sql = f"SELECT {o}COUNT(*){c} FROM {t}"
    elif form == 3:
        sql = f"SELECT SUM({o}{measure}{c}) FROM {t}"
    elif form == 4:
        sql = f"{o}SELECT COUNT(*) FROM {t}{c}"
    elif form == 5:
        sql = f"SELECT COUNT(*) FROM {t} WHERE {'NOT ' * depth}{dim} = {value}"
    elif form == 6:
        sql = f"SELECT COUNT(*) FROM {t} WHERE {dim} = {'-' * depth}1"
    elif form == 7:
        sql = f"SELECT COUNT(*) FROM {t} WHERE {dim} = {'lower(' * depth}{value}{c}"
    elif form == 8:
        inner = f"SELECT COUNT(*) FROM {t}"
        for _ in range(min(depth, 200)):
            inner = f"SELECT COUNT(*) FROM ({inner})"
        sql = inner
    else:
        unbalanced = pick(draw, [o, c, o + value, value + c])
        sql = f"SELECT COUNT(*) FROM {t} WHERE {dim} = {unbalanced}"
    return Fuzzed(sql, None, "near")


@st.composite
def chains(draw: Draw, sch: Schema) -> Fuzzed:
    """Long AND and OR chains, huge IN lists."""
    rng = seeded(draw)
    size = pick(draw, SIZES) if one_in(draw, 2) else 1 + draw(below(300))
    dims = list(sch.dimensions)
    t = sch.table

    def value(dim: str) -> str:
        values = sch.dimensions[dim]
        if rng.random() < 0.1:
            return str(rng.randrange(-(10**6), 10**6)) if sch.numeric(dim) else sql_string(f"v{rng.random()}")
        return str(rng.choice(values)) if sch.numeric(dim) else sql_string(str(rng.choice(values)))

    form = draw(below(4))
    if form == 0:
        terms = []
        for _ in range(size):
            dim = rng.choice(dims)
            terms.append(f"{dim} {rng.choice(['=', '<>', '>=', '<'])} {value(dim)}")
        return Fuzzed(f"SELECT COUNT(*) FROM {t} WHERE {' AND '.join(terms)}", None, "near")
    if form == 1:
        terms = [f"{dims[0]} = {value(dims[0])}" for _ in range(size)]
        return Fuzzed(f"SELECT COUNT(*) FROM {t} WHERE {' OR '.join(terms)}", None, "near")
    dim = rng.choice(dims)
    values = [value(dim) for _ in range(size)]
    if form == 2:
        return Fuzzed(
            f"SELECT SUM({next(iter(sch.measures))}) FROM {t} WHERE {dim} IN ({', '.join(values)})",
            None,
            "near",
        )
    params = Params()
    marks = [params.add(rng.choice(sch.dimensions[dim])) for _ in range(min(size, 1200))]
    return Fuzzed(f"SELECT COUNT(*) FROM {t} WHERE {dim} IN ({', '.join(marks)})", params.result(), "near")


@st.composite
def unicode(draw: Draw, sch: Schema) -> Fuzzed:
    """Odd characters in a literal, an identifier, or between tokens of a valid query."""
    base = draw_valid(draw, sch)
    rng = seeded(draw)
    odd = "".join(
        pick(draw, ODD_CHARACTERS) if one_in(draw, 3) else draw(st.characters())
        for _ in range(1 + draw(below(4)))
    )
    where = draw(below(4))
    dim = next(iter(sch.dimensions))
    if where == 0:
        return Fuzzed(f"SELECT COUNT(*) FROM {sch.table} WHERE {dim} = {sql_string('E' + odd)}", None, "near")
    if where == 1:
        return Fuzzed(f'SELECT COUNT("{dim}{odd}") FROM {sch.table}', None, "near")
    if where == 2:
        params = (f"E{odd}",)
        return Fuzzed(f"SELECT COUNT(*) FROM {sch.table} WHERE {dim} = $1", params, "near")
    at = rng.randrange(len(base.sql) + 1)
    return Fuzzed(base.sql[:at] + odd + base.sql[at:], base.parameters, "near")


@st.composite
def long_text(draw: Draw, sch: Schema) -> Fuzzed:
    """Very long literals, identifiers, comments and padding (the policy allows 20,000
    characters, ``guard serve`` 100,000)."""
    size = pick(draw, [1_000, 19_900, 20_000, 20_001, 50_000, 99_000, 100_001, 150_000])
    char = pick(draw, BLOB_CHARACTERS)
    dim = next(iter(sch.dimensions))
    t = sch.table
    blob = char * size
    form = draw(below(5))
    if form == 0:
        return Fuzzed(f"SELECT COUNT(*) FROM {t} WHERE {dim} = {sql_string(blob)}", None, "near")
    if form == 1:
        return Fuzzed(f'SELECT COUNT("{"x" * size}") FROM {t}', None, "near")
    if form == 2:
        return Fuzzed(f"SELECT COUNT(*) FROM {t} /* {blob.replace('*/', '')} */", None, "near")
    if form == 3:
        return Fuzzed(f"SELECT COUNT(*) FROM {t} WHERE {dim} = $1", ("E" * size,), "near")
    return Fuzzed(f"SELECT COUNT(*) FROM {t}" + " " * size, None, "near")


@st.composite
def placeholders(draw: Draw, sch: Schema) -> Fuzzed:
    """Placeholders and values that do not match, or values of odd types."""
    dim = next(iter(sch.dimensions))
    t = sch.table
    odd_values = [
        None,
        True,
        1980,
        1980.0,
        -0.0,
        float("nan"),
        float("inf"),
        10**30,
        "",
        "EE",
        "x" * 5000,
        "EE' OR '1'='1",
        "\ud800",
        "\x00",
        ["EE"],
        b"EE",
        {"a": 1},
    ]
    forms = [
        (f"SELECT COUNT(*) FROM {t} WHERE {dim} = $1", None),
        (f"SELECT COUNT(*) FROM {t} WHERE {dim} = $1", ()),
        (f"SELECT COUNT(*) FROM {t} WHERE {dim} = $2", ("EE",)),
        (f"SELECT COUNT(*) FROM {t} WHERE {dim} = $0", ("EE",)),
        (f"SELECT COUNT(*) FROM {t} WHERE {dim} = $99999999999999999999", ("EE",)),
        (f"SELECT COUNT(*) FROM {t} WHERE {dim} = ? AND {dim} = $1", ("EE", "CS")),
        (f"SELECT COUNT(*) FROM {t} WHERE {dim} = :name", ("EE",)),
        (f"SELECT COUNT(*) FROM {t}", ("EE",)),
        (f"SELECT COUNT(*) FROM {t} WHERE {dim} = $1::INTEGER", ("EE",)),
        (f"SELECT COUNT(*) FROM {t} LIMIT $1", (1,)),
        ("SELECT COUNT(*) FROM $1", ("students",)),
        (f"SELECT COUNT($1) FROM {t}", ("income",)),
        (f"SELECT COUNT(*) FROM {t} GROUP BY $1", (1,)),
    ]
    sql, params = pick(draw, forms)
    if params and one_in(draw, 2):
        params = tuple(pick(draw, odd_values) for _ in params)
    return Fuzzed(sql, params, "near")


def near_valid(sch: Schema) -> st.SearchStrategy[Fuzzed]:
    """One of the near-valid forms above, about equally often."""
    return st.one_of(
        typo(sch),
        wrong_column(sch),
        structure(sch),
        comments(sch),
        odd_literal(sch),
        nesting(sch),
        chains(sch),
        unicode(sch),
        long_text(sch),
        placeholders(sch),
    )
