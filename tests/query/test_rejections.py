"""Standing rejections are remembered per analyst and per text (a text differing only
in its trailing tag shares one only when its message cannot quote the tag), and a
remembered rejection is logged and answered exactly as a rejection read anew."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guard import Guard
from guard.errors import QueryRefused, QueryRejected
from guard.query import front
from guard.query.rejections import Rejections

from .test_front_cache import STUDENTS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def opened(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guard]:
    tmp_path = tmp_path_factory.mktemp("rejections")
    policy = tmp_path / "two.yaml"
    policy.write_text(
        f"""name: two
tables:
{STUDENTS}  castro:
    source: {{csv: {ROOT / "examples/castro/castro.csv"}}}
    privacy_unit: person_id
    columns:
      person_id: {{role: identifier}}
      municipality: {{role: dimension}}
      salary: {{role: measure, bounds: [0, 2000]}}
protection: {{history: {{audit: "off"}}}}
limits: {{max_sql_length: 300}}
noise: {{epsilon_per_query: 1, budgets: {{per_analyst: 5}}}}
analysts:
  alice: {{}}
  bob: {{tables: [students]}}
  carol: {{tables: [students], noise: noise}}
"""
    )
    with Guard.open(policy, state=tmp_path / "state") as guard:
        yield guard


@pytest.fixture
def guard(opened: Guard) -> Guard:
    """The guard, with nothing remembered yet."""
    opened.rejections = Rejections(opened.policy, opened.column_types)
    opened.front = front.FrontCache(opened.policy, opened.column_types)
    return opened


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts the front stages read (not answered from memory)."""
    seen: list[str] = []
    read = front.read_query

    def counting(sql: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(sql)
        return read(sql, *args, **kwargs)

    monkeypatch.setattr(front, "read_query", counting)
    return seen


def _rejection(guard: Guard, sql: str, analyst: str = "alice") -> str:
    with pytest.raises(QueryRejected) as caught:
        guard.query(sql, analyst=analyst)
    return caught.value.message


def test_a_rejected_text_is_read_once_and_logged_every_time(guard: Guard, reads: list[str]) -> None:
    texts = [f"SELECT name FROM students /* request {n} */" for n in range(4)]
    messages = {_rejection(guard, sql) for sql in texts}
    assert len(messages) == 1 and "identifies respondents" in messages.pop()
    # the first text, and its untagged head to check the message holds nothing of the tag
    assert reads == [texts[0], "SELECT name FROM students "]
    log = guard.log(limit=4)
    assert [r["sql"] for r in log] == texts
    assert {(r["decision"], r["error"], r["canonical"], r["data_version"]) for r in log} == {
        ("rejected", "QueryRejected", None, None)
    }
    assert len({r["reason"] for r in log}) == 1


def test_a_message_that_quotes_the_tag_is_not_shared(guard: Guard, reads: list[str]) -> None:
    one = _rejection(guard, "SELECT COUNT(*) FROM students ORDER BY major /* tag one */")
    two = _rejection(guard, "SELECT COUNT(*) FROM students ORDER BY major /* tag two */")
    assert "tag one" in one and "tag two" in two and "tag one" not in two
    assert len([r for r in reads if "ORDER BY" in r]) == 4  # each text read, and each head


def test_an_untagged_text_is_remembered_by_its_whole_text(guard: Guard, reads: list[str]) -> None:
    sql = "SELECT * FROM students"
    assert _rejection(guard, sql) == _rejection(guard, sql)
    assert reads == [sql]
    _rejection(guard, sql + " ")  # another text
    assert reads == [sql, sql + " "]


def test_a_rejection_is_not_shared_across_analysts(guard: Guard, reads: list[str]) -> None:
    castro = "SELECT municipality, COUNT(*) FROM castro GROUP BY municipality"
    assert "castro" in _rejection(guard, castro, "bob")
    assert "castro" in _rejection(guard, castro, "bob")
    assert reads == [castro]
    guard.query(castro, analyst="alice")  # bob's rejection is bob's
    # carol sees the same tables, but her answers carry noise: a disjunction is hers to ask
    either = "SELECT COUNT(*) FROM students WHERE major = 'EE' OR sex = 'Male'"
    assert "OR across columns" in _rejection(guard, either, "bob")
    try:
        guard.query(either, analyst="carol")
    except QueryRejected as error:
        pytest.fail(f"bob's rejection reached carol: {error.message}")
    except QueryRefused:
        pass  # judged on its own merits


def test_a_rejection_read_with_other_column_types_is_read_again(
    guard: Guard, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sql = "SELECT SUM(foo) FROM students"
    first = _rejection(guard, sql)
    types = dict(guard.column_types("students"), foo="DOUBLE")
    monkeypatch.setattr(guard, "column_types", lambda table: types if table == "students" else {})
    monkeypatch.setattr(guard.rejections, "_column_types", guard.column_types)
    _rejection(guard, sql)
    assert reads == [sql, sql] and first


def test_the_raw_text_checks_come_first(guard: Guard) -> None:
    _rejection(guard, "SELECT name FROM students /* request 1 */")
    limit = guard.policy.limits.max_sql_length
    padded = "SELECT name FROM students /* " + "x" * limit + " */"
    assert "characters long" in _rejection(guard, padded)


def test_a_text_planned_as_a_query_over_answers_is_not_a_rejection(guard: Guard) -> None:
    sql = "SELECT n * 2 FROM (SELECT COUNT(*) AS n FROM students) AS t /* request {} */"
    for n in range(2):
        result = guard.query(sql.format(n), analyst="alice")
        assert result.rows
    assert not guard.rejections._kept
