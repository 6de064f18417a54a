"""Hypothesis strategies of SQL for the guard: valid, near-valid, hostile and mutated.

Every strategy takes a :class:`~benchmarks.fuzz.schema.Schema` (default: the students
table of ``policies/students.yaml``, its columns, roles and values read from the policy
and its CSV) and yields a :class:`Fuzzed`: the SQL text, the values of its ``$n``
placeholders (None: no parameters) and its family.

- :func:`valid` (``grammar.py``): aggregate queries of shapes the guard accepts; it may
  still refuse to answer them.
- :func:`near_valid` (``near.py``): typos, wrong and forbidden columns, measures in
  WHERE, subqueries, set operations, functions, comments, odd literals, parentheses
  nested up to 5,000 deep, long AND chains, huge IN lists, unicode (lone surrogates,
  NUL), very long strings, placeholder mistakes.
- :func:`hostile` (``hostile.py``): files and table functions, ATTACH/COPY/PRAGMA/
  INSTALL, system catalogs, several statements, SQL injection.
- :func:`mutated` (``mutate.py``): byte-level edits of valid statements.
- :func:`statements`: all four, weighted by ``FAMILIES``.

Usage::

    from hypothesis import given
    from benchmarks.fuzz.strategies import statements

    @given(statements())
    def test_something(fuzzed): ...
"""

from __future__ import annotations

from hypothesis import strategies as st

from benchmarks.fuzz import grammar, mutate, near
from benchmarks.fuzz import hostile as hostile_forms
from benchmarks.fuzz.grammar import Draw, Fuzzed, seeded
from benchmarks.fuzz.schema import Schema, schema

__all__ = ["FAMILIES", "Fuzzed", "hostile", "mutated", "near_valid", "statements", "valid"]

#: family -> weight in :func:`statements`
FAMILIES = {"valid": 7, "near": 6, "hostile": 3, "mutated": 4}


def valid(sch: Schema | None = None) -> st.SearchStrategy[Fuzzed]:
    return grammar.valid(sch or schema("students"))


def near_valid(sch: Schema | None = None) -> st.SearchStrategy[Fuzzed]:
    return near.near_valid(sch or schema("students"))


def hostile(sch: Schema | None = None) -> st.SearchStrategy[Fuzzed]:
    return hostile_forms.hostile(sch or schema("students"))


def mutated(sch: Schema | None = None) -> st.SearchStrategy[Fuzzed]:
    return mutate.mutated(sch or schema("students"))


def statements(sch: Schema | None = None) -> st.SearchStrategy[Fuzzed]:
    """Every family, in the proportions of ``FAMILIES``."""
    sch = sch or schema("students")
    by_family = {
        "valid": valid(sch),
        "near": near_valid(sch),
        "hostile": hostile(sch),
        "mutated": mutated(sch),
    }
    names, weights = list(FAMILIES), list(FAMILIES.values())

    @st.composite
    def one(draw: Draw) -> Fuzzed:
        # a seeded choice keeps the proportions (hypothesis favours the first of a list)
        family = seeded(draw).choices(names, weights)[0]
        return draw(by_family[family])

    return one()
