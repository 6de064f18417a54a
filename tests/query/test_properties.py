"""Properties of stages 1-3 (parse, validate, analyze).

- Equivalent phrasings of one query share one canonical key: conjuncts in any order,
  ``x = v`` / ``x IN (v)`` / ``v = x``, mirrored ranges, BETWEEN SYMMETRIC, ``1980`` /
  ``1980.0``, qualified or quoted columns, keyword case, output order and aliases.
- Whatever text comes in, these stages answer or raise a GuardError; nothing else.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guard import Guard
from guard.errors import GuardError
from guard.policy.model import Policy
from guard.query.analyze import analyze
from guard.query.parse import parse
from guard.query.shape import QueryShape
from guard.query.validate import validate

ROOT = Path(__file__).resolve().parent.parent.parent
STUDENTS = ROOT / "policies" / "students.yaml"

# values per dimension: the seed's, plus ones no student has
VALUES: dict[str, list[str | int]] = {
    "sex": ["Female", "Male", "Other"],
    "major": ["CS", "EE", "Math", "it's"],
    "class": [1978, 1979, 1980, 1981, -7, 0],
}
AGGREGATES = ["COUNT(*)", "COUNT(income)", "SUM(income)", "AVG(income)", "COUNT(major)"]
MIRROR = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass(frozen=True)
class Engine:
    policy: Policy
    types: Mapping[str, str]

    def shape(self, sql: str) -> QueryShape:
        """Stages 1-3, as guard.core.Guard.query runs them."""
        tree = parse(sql, self.policy.limits)
        select, table = validate(tree, self.policy.tables)
        return analyze(select, table, self.types, self.policy.limits)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    # the column types come from the real backend, as they do in Guard.query
    with Guard.open(STUDENTS, state=tmp_path_factory.mktemp("students")) as guard:
        return Engine(guard.policy, guard.backend.table_info("students").types)


# --- the meaning of a query, and ways of writing it ------------------------------------


@dataclass(frozen=True)
class Conjunct:
    column: str
    op: str  # "in", "<", "<=", ">", ">=", "<>", "between", "is null", "is not null"
    values: tuple[str | int, ...] = ()


@st.composite
def conjuncts(draw: st.DrawFn) -> Conjunct:
    column = draw(st.sampled_from(sorted(VALUES)))
    value = st.sampled_from(VALUES[column])
    op = draw(st.sampled_from(["in", "<", "<=", ">", ">=", "<>", "between", "is null", "is not null"]))
    if op == "in":
        values = draw(st.lists(value, min_size=1, max_size=3, unique=True))
        return Conjunct(column, op, tuple(sorted(values, key=str)))
    if op == "between":
        return Conjunct(column, op, (draw(value), draw(value)))
    if op.startswith("is"):
        return Conjunct(column, op)
    return Conjunct(column, op, (draw(value),))


@dataclass(frozen=True)
class Query:
    conjuncts: tuple[Conjunct, ...]
    group_by: tuple[str, ...]
    aggregates: tuple[str, ...]


queries = st.builds(
    Query,
    conjuncts=st.lists(conjuncts(), max_size=4).map(tuple),
    group_by=st.lists(st.sampled_from(sorted(VALUES)), max_size=2, unique=True).map(tuple),
    aggregates=st.lists(st.sampled_from(AGGREGATES), min_size=1, max_size=3, unique=True).map(tuple),
)


def literal(draw: st.DrawFn, value: str | int) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    forms = [str(value), f"{value}.0"] if value >= 0 else [str(value), f"-{-value}.0"]
    return draw(st.sampled_from(forms))


def keyword(draw: st.DrawFn, word: str) -> str:
    return draw(st.sampled_from([word.upper(), word.lower(), word.capitalize()]))


def column(draw: st.DrawFn, name: str, alias: str | None) -> str:
    qualifiers = ["", "students.", '"students".'] + ([f"{alias}."] if alias else [])
    return draw(st.sampled_from(qualifiers)) + draw(st.sampled_from([name, f'"{name}"', name.upper()]))


def phrase(draw: st.DrawFn, c: Conjunct, alias: str | None) -> str:
    col = column(draw, c.column, alias)
    if c.op == "in":
        values = list(c.values) + draw(st.lists(st.sampled_from(c.values), max_size=2))  # duplicates
        values = draw(st.permutations(values))
        if len(set(values)) == 1 and draw(st.booleans()):
            lit = literal(draw, values[0])
            text = draw(st.sampled_from([f"{col} = {lit}", f"{lit} = {col}"]))
        else:
            text = f"{col} {keyword(draw, 'in')} ({', '.join(literal(draw, v) for v in values)})"
    elif c.op == "between":
        low, high = (literal(draw, v) for v in c.values)
        text = f"{col} {keyword(draw, 'between')} {low} {keyword(draw, 'and')} {high}"
        if c.values[0] <= c.values[1] and draw(st.booleans()):  # type: ignore[operator]
            text = f"{col} BETWEEN SYMMETRIC {high} AND {low}"
    elif c.op == "is null":
        text = f"{col} {keyword(draw, 'is')} NULL"
    elif c.op == "is not null":
        text = draw(st.sampled_from([f"{col} IS NOT NULL", f"NOT {col} IS NULL", f"{col} is not null"]))
    else:
        lit = literal(draw, c.values[0])
        reverse = draw(st.booleans())
        text = f"{lit} {MIRROR.get(c.op, c.op)} {col}" if reverse else f"{col} {c.op} {lit}"
        if c.op == "<>" and draw(st.booleans()):
            text = text.replace("<>", "!=")
    return f"({text})" if draw(st.booleans()) else text


def render(draw: st.DrawFn, q: Query) -> str:
    alias = draw(st.sampled_from([None, "s", "t"]))
    outputs = [
        f"{a} AS {keyword(draw, 'x')}{i}" if draw(st.booleans()) else a for i, a in enumerate(q.aggregates)
    ]
    outputs += [column(draw, g, alias) for g in q.group_by if draw(st.booleans())]
    outputs = draw(st.permutations(outputs))
    sql = f"{keyword(draw, 'select')} {', '.join(outputs)} {keyword(draw, 'from')} students"
    if alias:
        sql += draw(st.sampled_from([f" AS {alias}", f" {alias}"]))
    if q.conjuncts:
        parts = draw(st.permutations([phrase(draw, c, alias) for c in q.conjuncts]))
        sql += f" {keyword(draw, 'where')} " + f" {keyword(draw, 'and')} ".join(parts)
    if q.group_by:
        groups = draw(st.permutations([column(draw, g, alias) for g in q.group_by]))
        sql += f" {keyword(draw, 'group by')} " + ", ".join(groups)
    return sql


def plain(q: Query) -> str:
    """The reference phrasing: `=` for one value, conjuncts in the order drawn."""

    def text(c: Conjunct) -> str:
        lits = ["'" + str(v).replace("'", "''") + "'" if isinstance(v, str) else str(v) for v in c.values]
        if c.op == "in":
            return f"{c.column} = {lits[0]}" if len(lits) == 1 else f"{c.column} IN ({', '.join(lits)})"
        if c.op == "between":
            return f"{c.column} BETWEEN {lits[0]} AND {lits[1]}"
        if c.op.startswith("is"):
            return f"{c.column} {c.op.upper()}"
        return f"{c.column} {c.op} {lits[0]}"

    sql = f"SELECT {', '.join(q.aggregates)} FROM students"
    if q.conjuncts:
        sql += " WHERE " + " AND ".join(text(c) for c in q.conjuncts)
    if q.group_by:
        sql += " GROUP BY " + ", ".join(q.group_by)
    return sql


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FAST
@given(q=queries, data=st.data())
def test_equivalent_phrasings_share_one_canonical_key(engine: Engine, q: Query, data: st.DataObject) -> None:
    reference = engine.shape(plain(q)).canonical
    for _ in range(2):
        sql = data.draw(st.composite(lambda draw: render(draw, q))(), label="phrasing")
        assert engine.shape(sql).canonical == reference, sql


@FAST
@given(q=queries, other=conjuncts())
def test_another_condition_changes_the_key(engine: Engine, q: Query, other: Conjunct) -> None:
    if other in q.conjuncts:
        return
    narrowed = Query((*q.conjuncts, other), q.group_by, q.aggregates)
    assert engine.shape(plain(narrowed)).canonical != engine.shape(plain(q)).canonical


# --- garbage in, GuardError out -------------------------------------------------------

TOKENS = [
    "SELECT", "FROM", "WHERE", "GROUP", "BY", "ORDER", "LIMIT", "OFFSET", "AND", "OR", "NOT",
    "IN", "IS", "NULL", "BETWEEN", "AS", "ALL", "DISTINCT", "HAVING", "JOIN", "ON", "UNION",
    "WITH", "OVER", "FILTER", "CASE", "WHEN", "THEN", "END", "CAST", "COUNT", "SUM", "AVG",
    "MIN", "students", "s", "name", "sex", "major", "class", "income", "read_csv",
    "information_schema.tables", "*", "(", ")", ",", ";", "=", "<>", "<", ">=", "+", "-",
    "%", "||", "::", "'EE'", "'x'", "''", '"major"', "1980", "0", "-1", "1.5", "1e999",
    "²", "9" * 5000, "$1", "?", "[", "]", "{", "}", ".", "--", "/*", "*/", "\n", "DATE",
    "'2020-01-01'", "TRUE", "ROLLUP", "ATTACH", "COPY", "PRAGMA", "PIVOT", "USING", "SAMPLE",
]  # fmt: skip


def assert_guarded(engine: Engine, sql: str) -> None:
    """Stages 1-3 answer or raise a GuardError; any other exception fails the test."""
    with contextlib.suppress(GuardError):
        engine.shape(sql)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sql=st.lists(st.sampled_from(TOKENS), max_size=25).map(" ".join))
def test_token_soup_raises_only_guard_errors(engine: Engine, sql: str) -> None:
    assert_guarded(engine, sql)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    prefix=st.sampled_from(["", "SELECT COUNT(*) FROM students WHERE ", "SELECT "]),
    text=st.text(max_size=60),
)
def test_arbitrary_text_raises_only_guard_errors(engine: Engine, prefix: str, text: str) -> None:
    assert_guarded(engine, prefix + text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(q=queries, data=st.data())
def test_mutated_queries_raise_only_guard_errors(engine: Engine, q: Query, data: st.DataObject) -> None:
    words = plain(q).split(" ")
    position = data.draw(st.integers(0, len(words)), label="position")
    token = data.draw(st.sampled_from(TOKENS), label="token")
    if data.draw(st.booleans(), label="replace") and position < len(words):
        words[position] = token
    else:
        words.insert(position, token)
    assert_guarded(engine, " ".join(words))
