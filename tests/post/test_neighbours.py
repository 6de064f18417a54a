"""Neighbouring databases: changing the true values behind withheld cells changes nothing
a query over protected answers returns.

Two copies of the students table differ in the incomes of Allen and Baker, the female
students of CS and EE, whose cells of any answer grouped by sex and major are withheld
(fewer than k=3 students). Every query computed on that answer — random outer queries
and the shapes BI tools send — must come back identical, values and flags, from both.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from guard import Guard
from guard.errors import GuardError
from tests.post.expressions import INNER, outer_queries

ROOT = Path(__file__).resolve().parents[2]

QUERIES = [
    "SELECT sex, major, SUM(income) FROM students GROUP BY sex, major HAVING SUM(income) > 100000",
    "SELECT sex, major, COALESCE(AVG(income), 0) AS a FROM students GROUP BY sex, major",
    "SELECT sex, major, 100.0 * SUM(income) / SUM(SUM(income)) OVER (PARTITION BY sex) AS share "
    "FROM students GROUP BY sex, major",
    "SELECT sex, major, CASE WHEN SUM(income) > 120000 THEN 'high' ELSE 'low' END AS band "
    "FROM students GROUP BY sex, major ORDER BY 3, 1, 2",
    "WITH a AS (SELECT sex, major, SUM(income) AS s FROM students GROUP BY sex, major) "
    "SELECT sex, SUM(s) AS total, MAX(s) AS top FROM a GROUP BY sex ORDER BY sex",
    "SELECT major, n FROM (SELECT sex, major, COUNT(*) AS n FROM students GROUP BY sex, major) AS v "
    "WHERE sex = 'Female' UNION ALL SELECT 'all', COUNT(*) FROM students",
    "SELECT sex, major, RANK() OVER (ORDER BY AVG(income) DESC) AS r FROM students GROUP BY sex, major "
    "ORDER BY sex, major",
]


def _variant(tmp_path: Path, incomes: dict[str, int]) -> Path:
    rows = list(csv.DictReader((ROOT / "examples/students/students.csv").open()))
    for row in rows:
        row["income"] = str(incomes.get(row["name"], row["income"]))
    tag = "-".join(str(v) for v in incomes.values())
    data = tmp_path / f"students-{tag}.csv"
    with data.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    document = yaml.safe_load((ROOT / "policies/students.yaml").read_text())
    document["tables"]["students"]["source"]["csv"] = str(data)
    policy = tmp_path / f"students-{tag}.yaml"
    policy.write_text(yaml.safe_dump(document))
    return policy


@pytest.fixture(scope="module")
def neighbours(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Guard, Guard]]:
    tmp = tmp_path_factory.mktemp("neighbours")
    with (
        Guard.open(_variant(tmp, {"Allen": 1000, "Baker": 190000}), state=tmp / "low") as low,
        Guard.open(_variant(tmp, {"Allen": 150000, "Baker": 0}), state=tmp / "high") as high,
    ):
        yield low, high


def _answer(guard: Guard, sql: str) -> object:
    try:
        result = guard.query(sql, analyst="alice")
    except GuardError as error:
        return type(error).__name__, error.message
    return list(result.columns), [list(r) for r in result.rows], [list(f) for f in result.flags]


def test_the_neighbours_differ_where_withheld(neighbours: tuple[Guard, Guard]) -> None:
    low, high = neighbours
    sql = "SELECT sex, major, SUM(income) AS s FROM students GROUP BY sex, major ORDER BY 1, 2"
    assert _answer(low, sql) == _answer(high, sql)
    flags = low.query(sql, analyst="alice").flags
    assert [f[2] for f in flags] == ["suppressed", "suppressed", "released", "released"]


@pytest.mark.parametrize("sql", QUERIES)
def test_bi_shapes_are_the_same_on_neighbours(neighbours: tuple[Guard, Guard], sql: str) -> None:
    low, high = neighbours
    answer = _answer(low, sql)
    assert answer == _answer(high, sql)
    assert isinstance(answer[0], list), answer  # answered, not refused


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=outer_queries())
def test_random_outer_queries_are_the_same_on_neighbours(
    neighbours: tuple[Guard, Guard], query: tuple[str, bool]
) -> None:
    low, high = neighbours
    sql = query[0].format(source=f"({INNER}) AS t")
    assert _answer(low, sql) == _answer(high, sql)
