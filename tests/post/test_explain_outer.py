"""``guard explain`` on a query over protected answers (WITH, subqueries in FROM): the
query path answers it through its inner queries, each protected as if asked alone, so
explain names them, in order, to be explained one at a time (before, it said that WITH
is not allowed, which the query path contradicts)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from guard import Guard
from guard.errors import QueryRejected

POLICIES = Path(__file__).resolve().parents[2] / "policies"
INNER = "SELECT major, COUNT(*) AS n FROM students GROUP BY major"
SUMS = "SELECT major, SUM(income) AS s FROM students GROUP BY major"


@pytest.fixture
def students(tmp_path: Path) -> Iterator[Guard]:
    with Guard.open(POLICIES / "students.yaml", state=tmp_path / "state") as guard:
        yield guard


def test_a_with_query_names_its_inner_query_and_that_one_is_explained(students: Guard) -> None:
    outer = f"WITH t AS ({INNER}) SELECT major, n FROM t WHERE n > 2"
    with pytest.raises(QueryRejected, match="explain the inner query instead") as rejected:
        students.explain(outer, "alice")
    assert str(rejected.value).endswith(INNER)
    assert "not allowed" not in str(rejected.value)
    explained = students.explain(INNER, "alice")
    # asked, the outer query's inner answer is exactly what that explanation showed
    students.query(outer, "alice")
    inner = next(r for r in students.log() if r["sql"] == INNER and r["decision"] == "answered")
    assert inner["flags"] == [list(row) for row in explained.result.flags]
    assert [r["decision"] for r in students.log()][:2] == ["rejected", "explained"]


def test_several_inner_queries_are_named_in_the_order_they_are_asked(students: Guard) -> None:
    joined = f"SELECT a.major, a.n, b.s FROM ({INNER}) a JOIN ({SUMS}) b ON a.major = b.major"
    with pytest.raises(QueryRejected, match="explain each inner query instead, in this order") as rejected:
        students.explain(joined, "alice")
    assert str(rejected.value).endswith(f"(1) {INNER}; (2) {SUMS}")


def test_a_plain_rejection_keeps_its_message(students: Guard) -> None:
    with pytest.raises(QueryRejected, match=r"SELECT \* is not allowed"):
        students.explain("SELECT * FROM students", "alice")
