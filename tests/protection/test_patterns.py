"""The pattern cache gives the cells of a linked fetch exactly as one engine query does:
the same cells, in the same order (the suppression's problem follows that order)."""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Iterator, Mapping, Sequence

import pytest
import yaml

from guard import Guard
from guard.backends.base import TableInfo
from guard.cells import Cell
from guard.protection.linking import Linking, Pattern
from guard.protection.patterns import PatternCache
from guard.query.front import read_query
from guard.query.shape import QueryShape
from guard.suppression import TOTAL, Key

# a text column with NULLs, upper and lower case and a non-ASCII value (byte order), a
# number with NULLs and negatives, a date, a boolean
LETTERS = ["A", "Z", "a", "é", "Ωmega", None]
NUMBERS = [-3, 0, 2, 10, None]
DAYS = ["2020-01-31", "2019-12-01", "2021-06-15"]


@pytest.fixture(scope="module")
def guard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guard]:
    folder = tmp_path_factory.mktemp("patterns")
    picked = random.Random(7)
    lines = ["person,s,n,d,f,x"]
    for person in range(400):
        s, n = picked.choice(LETTERS), picked.choice(NUMBERS)
        lines.append(
            f"{person},{'' if s is None else s},{'' if n is None else n},{picked.choice(DAYS)},"
            f"{picked.choice(['true', 'false'])},{picked.randint(0, 50)}"
        )
    data = folder / "t.csv"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    policy = {
        "name": "patterns",
        "tables": {
            "t": {
                "source": {"csv": str(data)},
                "privacy_unit": "person",
                "columns": {
                    "person": {"role": "identifier"},
                    "s": {"role": "dimension"},
                    "n": {"role": "dimension"},
                    "d": {"role": "dimension"},
                    "f": {"role": "dimension"},
                    "x": {"role": "measure", "bounds": [0, 100]},
                },
            }
        },
        "analysts": {"alice": {}},
    }
    path = folder / "p.yaml"
    path.write_text(yaml.safe_dump(policy))
    with Guard.open(path, state=folder / "state") as opened:
        yield opened


INFO = TableInfo("t", {}, 0, 0, data_version="v1")


def read_query_shape() -> QueryShape:
    return QueryShape(table="t", predicates=(), group_by=(), aggregates=(), outputs=())


def _linking(guard: Guard, sql: str) -> tuple[Linking, object, object]:
    who = guard.policy.analyst("alice")
    front = read_query(sql, guard.policy, who, guard.column_types)
    info = guard.backend.table_info("t")
    return guard.linker.linking(who, front.table, front.shape, info), front.shape, info


PATTERNS: list[Pattern] = sorted(itertools.product((False, True), repeat=4))


def _joint(linking: Linking, space: str, patterns: Sequence[Pattern], filtered: bool) -> Mapping[Key, Cell]:
    assert linking.fetch is not None
    return linking.fetch(space, patterns, filtered)


@pytest.mark.parametrize("space", ["count(*)", "sum(x)"])
def test_merged_parts_equal_one_query_in_order(guard: Guard, space: str) -> None:
    linking, shape, info = _linking(guard, "SELECT s, SUM(x) FROM t GROUP BY s")
    cache = PatternCache()
    cached = cache.linking(linking, shape, info)  # type: ignore[arg-type]
    picked = random.Random(11)
    for _ in range(6):
        # some patterns read earlier (in other company), then all of them at once
        for p in picked.sample(PATTERNS, 5):
            assert cached.fetch is not None
            dict(cached.fetch(space, sorted({p, PATTERNS[0]}), False))  # read: kept
        wanted = sorted(picked.sample(PATTERNS, 9))
        expected = _joint(linking, space, wanted, False)
        assert cached.fetch is not None
        got = cached.fetch(space, wanted, False)
        assert list(got.items()) == list(expected.items())
    assert any(TOTAL in k and "null" in k for k in expected)  # a NULL value next to a total


def test_a_filtered_fetch_is_kept_per_filter(guard: Guard) -> None:
    cache = PatternCache()
    for sql in ("SELECT s, COUNT(*) FROM t WHERE n > 0 GROUP BY s", "SELECT s, COUNT(*) FROM t GROUP BY s"):
        linking, shape, info = _linking(guard, sql)
        cached = cache.linking(linking, shape, info)  # type: ignore[arg-type]
        assert cached.fetch is not None
        dict(cached.fetch("count(*)", PATTERNS[:3], True))
        expected = _joint(linking, "count(*)", PATTERNS[:6], True)
        assert list(cached.fetch("count(*)", PATTERNS[:6], True).items()) == list(expected.items())


def test_reads_only_missing_patterns_and_never_across_versions(guard: Guard) -> None:
    linking, shape, info = _linking(guard, "SELECT s, COUNT(*) FROM t GROUP BY s")
    asked: list[tuple[Pattern, ...]] = []
    inner = linking.fetch
    assert inner is not None

    def counting(space: str, patterns: Sequence[Pattern], filtered: bool) -> Mapping[Key, Cell]:
        asked.append(tuple(patterns))
        return inner(space, patterns, filtered)

    cache = PatternCache()
    counted = dataclasses.replace(linking, fetch=counting)
    first = cache.linking(counted, shape, info)  # type: ignore[arg-type]
    assert first.fetch is not None
    dict(first.fetch("count(*)", PATTERNS[:4], False))
    dict(first.fetch("count(*)", PATTERNS[:6], False))
    assert asked == [tuple(PATTERNS[:4]), tuple(PATTERNS[4:6])]
    newer = dataclasses.replace(info, data_version="another version")  # type: ignore[type-var]
    again = cache.linking(counted, shape, newer)  # type: ignore[arg-type]
    assert again.fetch is not None
    dict(again.fetch("count(*)", PATTERNS[:4], False))
    assert asked[-1] == tuple(PATTERNS[:4])


def test_a_bounded_cache_drops_the_oldest_pattern(guard: Guard) -> None:
    linking, shape, info = _linking(guard, "SELECT s, COUNT(*) FROM t GROUP BY s")
    cache = PatternCache(limit=40)
    cached = cache.linking(linking, shape, info)  # type: ignore[arg-type]
    assert cached.fetch is not None
    for p in PATTERNS:
        expected = _joint(linking, "count(*)", [PATTERNS[0], p], False)
        assert list(cached.fetch("count(*)", [PATTERNS[0], p], False).items()) == list(expected.items())
    assert cache.kept <= 40


def test_a_value_the_merge_cannot_order_is_read_in_one_query() -> None:
    """A DECIMAL key (tagged ``x:``) has no order here: the patterns are read together."""
    cell = Cell(1, 1, 10)
    rows = {
        (True, False): [(f"x:Decimal('{v}')", TOTAL) for v in ("2.5", "10.0")],
        (False, True): [(TOTAL, "s:a"), (TOTAL, "s:b")],
    }
    asked: list[tuple[Pattern, ...]] = []

    def inner(space: str, patterns: Sequence[Pattern], filtered: bool) -> Mapping[Key, Cell]:
        asked.append(tuple(patterns))
        return {k: cell for p in sorted(patterns, reverse=True) for k in rows[p]}

    linking = Linking(("a", "b"), {}, {}, inner, lambda *_: None)
    shape = read_query_shape()
    info = dataclasses.replace(INFO)
    cached = PatternCache().linking(linking, shape, info)
    assert cached.fetch is not None
    dict(cached.fetch("count(*)", [(True, False)], False))
    got = cached.fetch("count(*)", [(False, True), (True, False)], False)
    assert len(got) == 4
    assert list(got) == list(inner("count(*)", [(False, True), (True, False)], False))
    assert asked[:3] == [((True, False),), ((False, True),), ((False, True), (True, False))]


@pytest.mark.parametrize("filtered", [False, True])
def test_the_size_of_a_fetch_is_counted_without_reading_it(guard: Guard, filtered: bool) -> None:
    linking, shape, info = _linking(guard, "SELECT s, COUNT(*) FROM t WHERE n > 0 GROUP BY s")
    asked: list[tuple[Pattern, ...]] = []
    inner = linking.fetch
    assert inner is not None

    def counting(space: str, patterns: Sequence[Pattern], filtered: bool) -> Mapping[Key, Cell]:
        asked.append(tuple(patterns))
        return inner(space, patterns, filtered)

    cache = PatternCache(guard.backend)
    cached = cache.linking(dataclasses.replace(linking, fetch=counting), shape, info)  # type: ignore[arg-type]
    assert cached.fetch is not None
    cached.fetch("count(*)", PATTERNS[:5], filtered)
    assert len(asked) == 0  # nothing read yet
    for wanted in (PATTERNS[:5], PATTERNS):
        expected = _joint(linking, "count(*)", wanted, filtered)
        got = cached.fetch("count(*)", wanted, filtered)
        assert len(got) == len(expected)
        assert list(got.items()) == list(expected.items())
    assert asked == [tuple(PATTERNS[:5]), tuple(PATTERNS[5:])]
