"""Lists of a dimension's values: asked as COUNT(*) grouped by the listed columns, so the
same protection, history and log apply; only the values whose count is released are
listed, and no count ever leaves the guard (answer, log, offline audit)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from guard import Guard
from guard.audit.cellsets import GuardCells
from guard.audit.logsource import entries_from_store
from guard.errors import QueryRejected
from guard.query.front import read_query
from guard.query.listing import HIDDEN_COUNT, Listing
from guard.query.shape import AggFunc, Aggregate

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def students(tmp_path: Path) -> Iterator[Guard]:
    with Guard.open(ROOT / "policies/students.yaml", state=tmp_path / "state") as guard:
        yield guard


def test_a_list_is_read_as_its_count_query(students: Guard) -> None:
    policy = students.policy
    types = students.backend.table_info("students").types
    listed = read_query(
        "SELECT DISTINCT major FROM students WHERE sex = 'Male' ORDER BY major LIMIT 1 OFFSET 1",
        policy,
        policy.analyst("alice"),
        lambda _: types,
    )
    counted = read_query(
        "SELECT major, COUNT(*) FROM students WHERE sex = 'Male' GROUP BY major",
        policy,
        policy.analyst("alice"),
        lambda _: types,
    )
    assert listed.listing == Listing(columns=1, limit=1, offset=1)
    assert listed.answered_outputs == 1
    assert listed.shape.canonical == counted.shape.canonical
    assert listed.shape.aggregates == (Aggregate(AggFunc.COUNT, None),)
    assert [o.name for o in listed.shape.outputs] == ["major", HIDDEN_COUNT]
    assert (listed.shape.limit, listed.shape.offset) == (None, 0)  # every value is judged
    assert counted.listing is None and counted.answered_outputs == 2


def test_rare_values_are_withheld_and_the_log_keeps_the_list(students: Guard) -> None:
    result = students.query("SELECT DISTINCT class FROM students ORDER BY class DESC", "alice")
    # 1978: 4 students; 1979: 1, 1980: 2, 1981: 2 (k = 3)
    assert result.columns == ["class"]
    assert result.rows == [[1978]]
    assert result.flags == [["released"]]
    assert result.aggregates == ()
    assert result.notes == [
        "3 of 4 values not listed: a value is listed only where the number of its rows could be "
        "released (at least k=3 privacy units, and not withheld to protect a smaller group)"
    ]
    [row] = students.log()
    assert row["decision"] == "answered"
    assert row["sql"] == "SELECT DISTINCT class FROM students ORDER BY class DESC"
    assert row["columns"] == ["class"] and row["rows"] == [[1978]] and row["flags"] == [["released"]]
    canonical = '{"table":"students","where":[],"group_by":["class"],"aggregates":["count(*)"]}'
    assert row["canonical"] == canonical
    assert row["notes"] == list(result.notes)


def test_limit_and_offset_apply_to_the_listed_values(students: Guard) -> None:
    everything = students.query("SELECT DISTINCT sex, class FROM students ORDER BY 1, 2", "alice").rows
    assert everything == [["Male", 1978]]  # Male 1978: Cook, Frank, Hall
    majors = "SELECT DISTINCT major FROM students ORDER BY major"
    assert students.query(f"{majors} LIMIT 1", "alice").rows == [["CS"]]
    assert students.query(f"{majors} OFFSET 1", "alice").rows == [["EE"]]
    assert students.query("SELECT major FROM students GROUP BY major LIMIT 0", "alice").rows == []


def test_parameters_and_the_same_protection_as_the_count(students: Guard) -> None:
    listed = students.query("SELECT DISTINCT major FROM students WHERE sex = $1", "alice", ["Female"])
    assert listed.rows == []  # 2 women in CS, 1 in EE
    assert listed.notes[0].startswith("2 of 2 values not listed")
    logged = students.log()[-1]
    assert logged["sql"] == "SELECT DISTINCT major FROM students WHERE sex = 'Female'"
    counted = students.query(
        "SELECT major, COUNT(*) FROM students WHERE sex = 'Female' GROUP BY major", "alice"
    )
    assert [f[1] for f in counted.flags] == ["suppressed", "suppressed"]


def test_measures_are_not_listable_and_nothing_is_logged_as_answered(students: Guard) -> None:
    with pytest.raises(QueryRejected, match="measure 'income' cannot be listed"):
        students.query("SELECT DISTINCT income FROM students", "alice")
    with pytest.raises(QueryRejected, match="measure 'income' cannot be listed"):
        students.query("SELECT major, income FROM students GROUP BY major, income", "alice")
    assert [r["decision"] for r in students.log()] == ["rejected", "rejected"]


def test_the_offline_audit_counts_only_the_listed_values(students: Guard) -> None:
    students.query("SELECT DISTINCT class FROM students", "alice")
    [entry] = entries_from_store(students.log())
    cells = GuardCells(students.policy, students.backend).cells(entry)
    assert cells.notes == ()
    assert [c.label for c in cells.cells] == [c.label for c in cells.cells if "1978" in c.label]
    assert len(cells.cells) == 1 and cells.cells[0].space == "count"
