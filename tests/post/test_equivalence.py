"""A query over protected answers returns what the same computation gives in pandas on
the protected answer of its inner query asked alone, with a withheld input giving a
withheld output.

One guard per inner query's grouping (fresh state), so that the history audit sees one
partition of the table and protects every phrasing of it alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from guard import Guard

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "policies" / "students.yaml"

#: the inner query asked alone, as an analyst would write it
AGGREGATES = "COUNT(*) AS n, SUM(income) AS s, AVG(income) AS a"
BY_CELL = f"SELECT sex, major, {AGGREGATES} FROM students GROUP BY sex, major"
BY_MAJOR = f"SELECT major, {AGGREGATES} FROM students GROUP BY major"

Frame = pd.DataFrame


Case = tuple[str, str, Callable[[Frame], Frame]]


def _case(sql: str, inner: str, compute: Callable[[Frame], Frame]) -> Case:
    return sql, inner, compute


def _size(n: Any) -> str | None:
    return None if pd.isna(n) else ("many" if n > 2 else "few")


def _share(df: Frame) -> Frame:
    out = df[["major"]].copy()
    out["share"] = 100.0 * df["n"] / df["n"].sum(min_count=len(df))  # any withheld count: unknown
    return out


CASES = [
    _case(
        "SELECT major, ROUND(AVG(income), -3) AS r FROM students GROUP BY major ORDER BY major",
        BY_MAJOR,
        lambda df: df.assign(r=df["a"].round(-3))[["major", "r"]],
    ),
    _case(
        "SELECT sex, major, SUM(income) / COUNT(*) AS mean FROM students GROUP BY sex, major ORDER BY 1, 2",
        BY_CELL,
        lambda df: df.assign(mean=df["s"] / df["n"])[["sex", "major", "mean"]],
    ),
    _case(
        "SELECT sex, major, CAST(COUNT(*) AS INTEGER) AS n FROM students GROUP BY sex, major ORDER BY 1, 2",
        BY_CELL,
        lambda df: df[["sex", "major", "n"]],
    ),
    _case(
        "SELECT sex, major, CASE WHEN COUNT(*) > 2 THEN 'many' ELSE 'few' END AS size "
        "FROM students GROUP BY sex, major ORDER BY 1, 2",
        BY_CELL,
        lambda df: df.assign(size=df["n"].map(_size))[["sex", "major", "size"]],
    ),
    _case(
        # COALESCE of a withheld value is withheld: it is not a released 0
        "SELECT sex, major, COALESCE(AVG(income), 0) AS a FROM students GROUP BY sex, major ORDER BY 1, 2",
        BY_CELL,
        lambda df: df[["sex", "major", "a"]],
    ),
    _case(
        "SELECT major, COUNT(*) AS n FROM students GROUP BY major HAVING COUNT(*) > 4",
        BY_MAJOR,
        lambda df: df[df["n"] > 4][["major", "n"]],
    ),
    _case(
        "SELECT sex, major, COUNT(*) AS n FROM students GROUP BY sex, major HAVING COUNT(*) >= 3 "
        "ORDER BY 1, 2",
        BY_CELL,
        lambda df: df[df["n"] >= 3][["sex", "major", "n"]],  # a withheld count (NaN) fails the filter
    ),
    _case(
        "SELECT major, 100.0 * COUNT(*) / SUM(COUNT(*)) OVER () AS share FROM students GROUP BY major "
        "ORDER BY 1",
        BY_MAJOR,
        _share,
    ),
    _case(
        "SELECT major, SUM(income) * 1 AS s FROM students GROUP BY major ORDER BY s DESC LIMIT 1",
        BY_MAJOR,
        lambda df: df.sort_values("s", ascending=False).head(1)[["major", "s"]],
    ),
    _case(
        "SELECT major, n FROM (" + BY_MAJOR + ") AS virtual_table ORDER BY major LIMIT 1000",
        BY_MAJOR,
        lambda df: df[["major", "n"]].head(1000),
    ),
    _case(
        'SELECT "source"."major" AS "major", "source"."s" AS "s" FROM (' + BY_MAJOR + ') "source" '
        'ORDER BY "source"."major" LIMIT 1048575',
        BY_MAJOR,
        lambda df: df[["major", "s"]],
    ),
    _case(
        "WITH cells AS (" + BY_CELL + ") SELECT sex, SUM(s) AS total FROM cells GROUP BY sex ORDER BY sex",
        BY_CELL,
        lambda df: df.groupby("sex", as_index=False).agg(total=("s", lambda s: s.sum(min_count=len(s)))),
    ),
    _case(
        f"SELECT major, n FROM ({BY_MAJOR}) AS a UNION ALL SELECT 'all', SUM(n) FROM ({BY_MAJOR}) AS b",
        BY_MAJOR,
        lambda df: pd.concat(
            [df[["major", "n"]], pd.DataFrame({"major": ["all"], "n": [df["n"].sum(min_count=len(df))]})],
            ignore_index=True,
        ),
    ),
]


@pytest.fixture(scope="module")
def guards(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Guard]]:
    """The guard of an inner query's grouping, which has answered that query alone first."""
    opened: dict[str, Guard] = {}

    def get(inner: str) -> Guard:
        if inner not in opened:
            opened[inner] = Guard.open(POLICY, state=tmp_path_factory.mktemp("equivalence"))
        return opened[inner]

    yield get
    for guard in opened.values():
        guard.close()


def _values(frame: Frame) -> list[list[Any]]:
    return [[None if _missing(v) else v for v in row] for row in frame.itertuples(index=False, name=None)]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _close(x: Any, y: Any) -> bool:
    if x is None or y is None:
        return x is None and y is None
    if isinstance(x, str) or isinstance(y, str):
        return bool(x == y)
    return math.isclose(float(x), float(y), rel_tol=1e-9)


@pytest.mark.parametrize("sql, inner, compute", CASES, ids=[c[0][:60] for c in CASES])
def test_equals_pandas_on_the_protected_inner_answer(
    sql: str, inner: str, compute: Callable[[Frame], Frame], guards: Callable[[str], Guard]
) -> None:
    guard = guards(inner)
    protected = guard.query(inner, analyst="alice").to_pandas()
    result = guard.query(sql, analyst="alice")
    expected = _values(compute(protected))
    assert len(result.rows) == len(expected), (result.rows, expected)
    for row, flags, want in zip(result.rows, result.flags, expected, strict=True):
        assert all(_close(a, b) for a, b in zip(row, want, strict=True)), (row, want)
        for value, flag in zip(row, flags, strict=True):
            assert (flag == "suppressed") == (value is None)  # no released NULL in these answers
