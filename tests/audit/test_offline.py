"""The offline audit on the students table: the Baker pair, re-phrasings, harmless logs.

SUM(income) for EE minus SUM(income) for male EE is Baker's income (she is the only
female EE). A system without history control answered both; the audit must say so,
naming both queries and both analysts, and never print an income.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from guard import Guard
from guard.audit.cellsets import GuardCells
from guard.audit.logsource import LogEntry, read_log
from guard.audit.offline import AuditResult, Status, audit_log
from guard.audit.report import to_html, to_json, to_markdown

ROOT = Path(__file__).resolve().parents[2]
STUDENTS = ROOT / "policies" / "students.yaml"
EE = "SELECT SUM(income) FROM students WHERE major = 'EE'"
MALE_EE = "SELECT SUM(income) FROM students WHERE major = 'EE' AND sex = 'Male'"
BAKER = {"sex": "Female", "major": "EE", "class": 1980}


@pytest.fixture
def students(tmp_path: Path) -> Iterator[Guard]:
    with Guard.open(STUDENTS, state=tmp_path / "state") as guard:
        yield guard


def replay(guard: Guard, *queries: tuple[str, str]) -> AuditResult:
    entries = [LogEntry(i, f"test:{i}", who, None, sql) for i, (who, sql) in enumerate(queries, start=1)]
    k = guard.policy.protection.min_query_set_size
    return audit_log(entries, GuardCells(guard.policy, guard.backend), k)


def test_baker_pair_is_a_disclosure_naming_both_queries_and_analysts(students: Guard) -> None:
    result = replay(students, ("alice", EE), ("bob", MALE_EE))
    [baker] = result.disclosures
    assert (baker.table, baker.space, baker.rows, baker.units) == ("students", "sum(income)", 1, 1)
    assert baker.entries == (1, 2) and baker.seq == 2
    assert baker.analysts == ("alice", "bob") and baker.collusion
    assert baker.description == BAKER
    assert [p.disclosures for p in result.timeline] == [0, 1]


def test_one_analyst_asking_both_is_no_collusion(students: Guard) -> None:
    [baker] = replay(students, ("alice", MALE_EE), ("alice", EE)).disclosures
    assert baker.analysts == ("alice",) and not baker.collusion and baker.entries == (1, 2)


@pytest.mark.parametrize(
    "second",
    [
        "SELECT SUM(income) FROM students WHERE major IN ('EE') AND sex = 'Male'",
        "SELECT SUM(income) FROM students WHERE sex = 'Male' AND major = 'EE'",
        "select sum(INCOME) as s from students as t where 'EE' = t.major and t.sex in ('Male')",
        "SELECT AVG(income) FROM students WHERE sex = 'Male' AND major = 'EE'",
        "SELECT sex, SUM(income) FROM students WHERE major = 'EE' AND sex = 'Male' GROUP BY sex",
    ],
)
def test_rephrased_pair_is_still_detected(students: Guard, second: str) -> None:
    [baker] = replay(students, ("alice", EE), ("bob", second)).disclosures
    assert baker.units == 1 and baker.entries == (1, 2) and baker.description == BAKER


def test_a_single_grouped_query_can_disclose_on_its_own(students: Guard) -> None:
    grouped = "SELECT sex, SUM(income) FROM students WHERE major = 'EE' GROUP BY sex"
    result = replay(students, ("carol", grouped))
    [baker] = result.disclosures
    assert baker.entries == (1,) and baker.units == 1 and baker.description == BAKER
    assert [c.cell for c in baker.cells] == ["sex='Female'"]


def test_counts_are_audited_in_their_own_space(students: Guard) -> None:
    result = replay(
        students,
        ("alice", "SELECT COUNT(*) FROM students WHERE major = 'EE'"),
        ("bob", "SELECT COUNT(*) FROM students WHERE major = 'EE' AND sex = 'Male'"),
    )
    [lonely] = result.disclosures
    assert lonely.space == "count" and lonely.units == 1 and lonely.analysts == ("alice", "bob")


def test_harmless_log_discloses_nothing(students: Guard) -> None:
    result = replay(
        students,
        ("alice", "SELECT major, SUM(income) FROM students GROUP BY major"),
        ("bob", "SELECT SUM(income) FROM students"),
        ("bob", "SELECT sex, COUNT(*) FROM students GROUP BY sex"),
        ("alice", "SELECT major, AVG(income) FROM students GROUP BY major ORDER BY 2 DESC"),
    )
    assert result.disclosures == ()
    assert all(e.status is Status.REPLAYED for e in result.entries)
    # every group found holds at least k students, and the repeats added nothing
    assert result.determined and all(d.units >= 3 for d in result.determined)
    assert result.entries[3].cells == 2 and result.entries[3].informative == 0


def test_rejected_sql_is_listed_as_not_replayable(students: Guard) -> None:
    result = replay(
        students,
        ("alice", EE),
        ("mallory", "SELECT income FROM students WHERE name = 'Baker'"),
        ("mallory", "DROP TABLE students"),
        ("bob", MALE_EE),
    )
    skipped = result.not_replayable
    assert [e.entry.seq for e in skipped] == [2, 3]
    assert skipped[0].reason is not None and "cannot be output row by row" in skipped[0].reason
    assert skipped[1].reason is not None and "DROP TABLE is not allowed" in skipped[1].reason
    [baker] = result.disclosures
    assert baker.entries == (1, 4)


def test_limit_in_a_foreign_log_counts_every_cell_with_a_note(students: Guard) -> None:
    result = replay(students, ("alice", "SELECT sex, major, COUNT(*) FROM students GROUP BY 1, 2 LIMIT 1"))
    assert result.entries[0].cells == 4 and "LIMIT/OFFSET" in result.entries[0].notes[0]
    assert {d.units for d in result.disclosures} == {1, 2}  # female EE, female CS


def test_log_files_replay_like_entries(students: Guard, tmp_path: Path) -> None:
    log = tmp_path / "log.csv"
    log.write_text(f'analyst,ts,sql\nalice,1714550400,{EE}\nbob,1714554000,"{MALE_EE}"\n')
    k = students.policy.protection.min_query_set_size
    result = audit_log(read_log(log), GuardCells(students.policy, students.backend), k)
    [baker] = result.disclosures
    assert baker.analysts == ("alice", "bob")
    assert [result.entry(s).ref for s in baker.entries] == ["log.csv:2", "log.csv:3"]


def test_the_report_never_holds_an_income(students: Guard) -> None:
    result = replay(students, ("alice", EE), ("bob", MALE_EE))
    document = to_json(result, policy="students", log="test", generated=dt.datetime(2024, 5, 1))
    texts = [json.dumps(document), to_markdown(document), to_html(document)]
    for income in ("50000", "50,000", "240000", "190000", "240,000", "190,000"):
        assert all(income not in text for text in texts)


def test_rows_without_a_privacy_unit_leave_gaps_in_row_ids(tmp_path: Path) -> None:
    # the snapshot drops rows whose unit is NULL, so _rid skips their numbers
    rows = (ROOT / "examples" / "students" / "students.csv").read_text().splitlines()
    data = tmp_path / "students.csv"
    data.write_text("\n".join([rows[0], ",Male,EE,1979,1000", *rows[1:], ",Female,EE,1980,1"]) + "\n")
    policy = tmp_path / "students.yaml"
    policy.write_text(STUDENTS.read_text().replace("../examples/students/students.csv", str(data)))
    with Guard.open(policy, state=tmp_path / "state") as guard:
        assert guard.backend.table_info("students").rows == 9
        [baker] = replay(guard, ("alice", EE), ("bob", MALE_EE)).disclosures
    assert baker.units == 1 and baker.description == BAKER


def test_a_tracker_written_with_or_across_columns_is_found(students: Guard) -> None:
    """EE plus female minus (EE OR female) is the female EE students: Baker alone. The
    offline audit reads the disjunction as the rows it selects, like the online audit."""
    result = replay(
        students,
        ("alice", EE),
        ("alice", "SELECT SUM(income) FROM students WHERE sex = 'Female'"),
        ("bob", "SELECT SUM(income) FROM students WHERE major = 'EE' OR sex = 'Female'"),
    )
    assert not result.not_replayable
    [baker] = [d for d in result.disclosures if d.units == 1]
    assert baker.description == BAKER and baker.entries == (1, 2, 3) and baker.collusion
