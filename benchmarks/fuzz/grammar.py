"""The grammar of valid statements, and the pieces the other families build on.

:func:`valid` yields aggregate queries the guard may answer or refuse: COUNT/SUM/AVG;
WHERE with =, <>, IN, BETWEEN [SYMMETRIC], ranges, IS [NOT] NULL; GROUP BY, ROLLUP,
CUBE, GROUPING SETS, GROUP BY ALL, ordinals; ORDER BY, LIMIT/OFFSET/FETCH; aliases,
qualified and quoted names, keyword case, separators and comments; ``$n`` parameters.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from hypothesis import strategies as st

from benchmarks.fuzz.schema import Schema

__all__ = [
    "Draw",
    "Fuzzed",
    "Params",
    "Style",
    "aggregate",
    "below",
    "draw_valid",
    "grouping",
    "literal",
    "one_in",
    "pick",
    "predicate",
    "seeded",
    "sql_string",
    "sql_value",
    "valid",
]

Draw = Callable[[st.SearchStrategy[Any]], Any]
T = TypeVar("T")


@dataclass(frozen=True)
class Fuzzed:
    """One statement to send."""

    sql: str
    #: values of $1, $2, ... (None: send no parameters)
    parameters: tuple[Any, ...] | None
    family: str

    def short(self, limit: int = 240) -> str:
        """``repr`` of the SQL (and parameters), cut to about ``limit`` characters."""
        text = repr(self.sql)
        if len(text) > limit:
            text = f"{text[: limit // 2]}...<{len(self.sql):,} chars>...{text[-limit // 4 :]}"
        if self.parameters is not None:
            shown = repr(self.parameters)
            text += f" parameters={shown[:120]}{'...' if len(shown) > 120 else ''}"
        return text


class Params:
    """Collects the values of the placeholders a statement is built with."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def add(self, value: Any) -> str:
        self.values.append(value)
        return f"${len(self.values)}"

    def result(self) -> tuple[Any, ...] | None:
        return tuple(self.values) if self.values else None


# --- literals --------------------------------------------------------------------------

#: values no row has, of both types
UNSEEN_TEXT = ("Math", "it's", "", " EE", "ee", "CS ", "Ω", "NULL", "null", "%", "_", "E%")
UNSEEN_INT = (-7, 0, 1, 1977, 1982, 2**31, -(2**31) - 1, 99999)


def sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def sql_value(value: Any) -> str:
    """``value`` as a SQL literal."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    if value is None:
        return "NULL"
    return sql_string(str(value))


@functools.cache
def below(n: int) -> st.SearchStrategy[int]:
    return st.integers(0, n - 1)


def pick(draw: Draw, items: Sequence[T]) -> T:
    """One of ``items``: a drawn index, so that no strategy is built per draw."""
    return items[draw(below(len(items)))]


def one_in(draw: Draw, n: int) -> bool:
    """True about once in ``n`` draws."""
    return draw(below(n)) == 0


def literal(draw: Draw, sch: Schema, dimension: str, params: Params | None = None) -> str:
    """A constant for ``dimension``: mostly a value of the data, sometimes one no row
    has; as a literal in the text or, with ``params``, sometimes as a placeholder."""
    unseen: tuple[Any, ...] = UNSEEN_INT if sch.numeric(dimension) else UNSEEN_TEXT
    value = pick(draw, unseen) if one_in(draw, 10) else pick(draw, sch.dimensions[dimension])
    if params is not None and one_in(draw, 6):
        return params.add(value)
    if isinstance(value, str) and "$" not in value and one_in(draw, 20):
        return f"$${value}$$"  # dollar quoting
    return sql_value(value)


# --- spelling --------------------------------------------------------------------------

SEPARATORS = (" ", " ", " ", "\n", "\t", "  ", " /* c */ ", "\r\n")
ENDINGS = ("", "", ";", " ", "\n", " -- end")
DIRECTIONS = ("", " ASC", " DESC", " DESC NULLS FIRST", " ASC NULLS LAST")


@dataclass(frozen=True)
class Style:
    """How one statement is spelt: keyword case, separators, table alias, quoting."""

    upper: bool
    mixed: bool
    separator: str
    alias: str | None
    qualify: bool
    quote: bool

    @classmethod
    def draw(cls, draw: Draw) -> Style:
        return cls(
            upper=not one_in(draw, 3),
            mixed=one_in(draw, 10),
            separator=pick(draw, SEPARATORS),
            alias=pick(draw, (None, None, "s", "t1")),
            qualify=one_in(draw, 2),
            quote=one_in(draw, 6),
        )

    def kw(self, word: str) -> str:
        if self.mixed:
            return "".join(c.upper() if i % 2 else c.lower() for i, c in enumerate(word))
        return word.upper() if self.upper else word.lower()

    def col(self, name: str) -> str:
        text = f'"{name}"' if self.quote else name
        return f"{self.alias}.{text}" if self.qualify and self.alias else text

    def table(self, name: str) -> str:
        text = f'"{name}"' if self.quote else name
        if self.alias is None:
            return text
        return f"{text} {self.kw('AS')} {self.alias}" if self.upper else f"{text} {self.alias}"


# --- valid statements ------------------------------------------------------------------


def predicate(draw: Draw, sch: Schema, style: Style, params: Params | None = None) -> str:
    """One condition on one dimension, of a form the guard accepts."""
    dim = pick(draw, list(sch.dimensions))
    col, kw = style.col(dim), style.kw

    def value() -> str:
        return literal(draw, sch, dim, params)

    form = draw(below(10 if sch.numeric(dim) else 7))
    if form == 0:
        return f"{col} = {value()}"
    if form == 1:
        return f"{value()} = {col}"
    if form == 2:
        return f"{col} <> {value()}"
    if form == 3:
        values = [value() for _ in range(1 + draw(below(4)))]
        return f"{col} {kw('IN')} ({', '.join(values)})"
    if form == 4:
        return f"{col} {kw('IS')} {kw('NOT') + ' ' if one_in(draw, 2) else ''}{kw('NULL')}"
    if form == 5:
        return f"({col} = {value()})"
    if form == 6:
        return f"{kw('NOT')} {col} {kw('IS')} {kw('NULL')}"
    op = pick(draw, ("<", "<=", ">", ">="))
    if form == 7:
        return f"{col} {op} {value()}"
    if form == 8:
        return f"{value()} {op} {col}"
    symmetric = f" {kw('SYMMETRIC')}" if one_in(draw, 2) else ""
    return f"{col} {kw('BETWEEN')}{symmetric} {value()} {kw('AND')} {value()}"


def aggregate(draw: Draw, sch: Schema, style: Style) -> str:
    """COUNT(*), COUNT(column), SUM or AVG of a measure, spelt one of several ways."""
    kw = style.kw
    measure = style.col(pick(draw, list(sch.measures)))
    form = draw(below(6))
    if form == 0:
        return f"{kw('COUNT')}(*)"
    if form == 1:
        return f"{kw('COUNT')}({style.col(pick(draw, [*sch.dimensions, *sch.measures]))})"
    if form == 2:
        return f"{kw('SUM')}({measure})"
    if form == 3:
        return f"{kw('AVG')}({measure})"
    if form == 4:
        return f"{kw('COUNT')}({kw('ALL')} {measure})"
    return f"({kw('SUM')}(({measure})))"


def grouping(draw: Draw, style: Style, keys: list[str]) -> str:
    """The GROUP BY clause over ``keys``, which are the first outputs."""
    kw = style.kw
    cols = [style.col(k) for k in keys]
    form = draw(below(9))
    if form <= 2:
        return f"{kw('GROUP BY')} {', '.join(cols)}"
    if form == 3:
        return f"{kw('GROUP BY')} {', '.join(str(i + 1) for i in range(len(keys)))}"
    if form == 4:
        return f"{kw('GROUP BY')} {kw('ALL')}"
    if form == 5:
        return f"{kw('GROUP BY')} {kw('ROLLUP')} ({', '.join(cols)})"
    if form == 6:
        return f"{kw('GROUP BY')} {kw('CUBE')} ({', '.join(cols)})"
    if form == 7:
        sets = ", ".join(f"({c})" for c in cols) + ", ()"
        return f"{kw('GROUP BY')} {kw('GROUPING SETS')} ({sets})"
    rolled = f", {kw('ROLLUP')} ({', '.join(cols[1:])})" if cols[1:] else ""
    return f"{kw('GROUP BY')} {cols[0]}{rolled}"


@st.composite
def valid(draw: Draw, sch: Schema) -> Fuzzed:
    """An aggregate query of a shape the guard accepts (it may still refuse to answer)."""
    return draw_valid(draw, sch)


def draw_valid(draw: Draw, sch: Schema) -> Fuzzed:
    """:func:`valid`, drawn inside another strategy."""
    style = Style.draw(draw)
    kw = style.kw
    params = Params() if one_in(draw, 5) else None
    dims = list(sch.dimensions)
    keys = [dims[i] for i in sorted(set(draw(below(len(dims))) for _ in range(draw(below(4)))))]
    shown = bool(keys) and not one_in(draw, 3)  # grouping keys in the output, or not
    aggregates = [aggregate(draw, sch, style) for _ in range(1 + draw(below(3)))]
    aliased = [f"{a} {kw('AS')} n{i}" if one_in(draw, 2) else a for i, a in enumerate(aggregates)]
    outputs = [style.col(k) for k in keys] if shown else []
    clauses = [f"{kw('SELECT')} {', '.join([*outputs, *aliased])}", f"{kw('FROM')} {style.table(sch.table)}"]
    conditions = [predicate(draw, sch, style, params) for _ in range(draw(below(5)))]
    if conditions:
        joiner = f" {kw('AND')} "
        clauses.append(f"{kw('WHERE')} {joiner.join(conditions)}")
    if shown:
        clauses.append(grouping(draw, style, keys))
    elif keys:
        clauses.append(f"{kw('GROUP BY')} {', '.join(style.col(k) for k in keys)}")
    if one_in(draw, 3):
        position = 1 + draw(below(len(outputs) + len(aliased)))
        clauses.append(f"{kw('ORDER BY')} {position}{kw(pick(draw, DIRECTIONS))}")
    tail = draw(below(6))
    if tail == 0:
        clauses.append(f"{kw('LIMIT')} {draw(below(21))}")
    elif tail == 1:
        clauses.append(f"{kw('LIMIT')} {1 + draw(below(5))} {kw('OFFSET')} {draw(below(6))}")
    elif tail == 2:
        clauses.append(f"{kw('FETCH FIRST')} {1 + draw(below(3))} {kw('ROWS ONLY')}")
    text = style.separator.join(clauses) + pick(draw, ENDINGS)
    return Fuzzed(text, params.result() if params else None, "valid")


def seeded(draw: Draw) -> random.Random:
    """A ``random.Random`` for bulk content (a 3,000-term AND chain, a 5,000-value IN
    list), seeded from one drawn integer: it keeps hypothesis' choice sequence short."""
    return random.Random(draw(st.integers(0, 2**32 - 1)))
