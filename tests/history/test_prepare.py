"""Guard.prepare builds each audited table's history state before the first answer
(servers call it before they accept connections), so the first analyst does not pay
for it; answers are the same either way."""

from __future__ import annotations

from pathlib import Path

import pytest

from guard import Guard
from guard.history import finest, span
from guard.state.records import ReleaseStatus

POLICIES = Path(__file__).resolve().parents[2] / "policies"
SQL = "SELECT major, COUNT(*) FROM students GROUP BY major"


def test_the_first_answer_after_prepare_builds_no_finest_cells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []
    original = finest.FinestCells.__init__

    def counting(self: finest.FinestCells, *args: object, **kwargs: object) -> None:
        built.append("finest")
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(finest.FinestCells, "__init__", counting)
    with Guard.open(POLICIES / "students.yaml", state=tmp_path / "prepared") as guard:
        assert guard.prepare() == ["students"]
        assert built == ["finest"]
        prepared = guard.query(SQL, "alice")
        assert built == ["finest"]  # nothing left to build for the first answer
    with Guard.open(POLICIES / "students.yaml", state=tmp_path / "cold") as guard:
        cold = guard.query(SQL, "alice")
    assert built == ["finest", "finest"]
    assert prepared.rows == cold.rows and prepared.flags == cold.flags


def test_prepare_skips_tables_answered_with_noise(tmp_path: Path) -> None:
    """hospital-dp answers its one table with noise to everyone; hospital does not."""
    with Guard.open(POLICIES / "hospital-dp.yaml", state=tmp_path / "dp") as guard:
        assert guard.history is not None
        assert guard.prepare() == []
    with Guard.open(POLICIES / "hospital.yaml", state=tmp_path / "plain") as guard:
        assert guard.prepare() == ["hospital"]


def test_the_first_answers_after_prepare_build_no_audit_state_and_read_no_releases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The audit states of every space (COUNT, each measure's SUM) and the linker's
    memory of earlier releases are built by prepare, from what the store holds."""
    with Guard.open(POLICIES / "students.yaml", state=tmp_path / "state") as guard:
        guard.query("SELECT major, SUM(income) FROM students GROUP BY major", "alice")
    built: list[str] = []
    original = span.SpanAuditor.__init__

    def counting(self: span.SpanAuditor, *args: object, **kwargs: object) -> None:
        built.append("state")
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(span.SpanAuditor, "__init__", counting)
    with Guard.open(POLICIES / "students.yaml", state=tmp_path / "state") as guard:
        guard.prepare()
        prepared = len(built)
        assert prepared >= 2  # count and sum(income) at least
        loads: list[str | None] = []
        released = guard.store.released

        def reading(version: str, table: str, analyst: str | None) -> list[tuple[str, str, ReleaseStatus]]:
            loads.append(analyst)
            return released(version, table, analyst)

        guard.linker._load = reading  # counts the store's reads of releases
        guard.query("SELECT COUNT(*) FROM students", "alice")
        guard.query("SELECT SUM(income) FROM students WHERE major = 'EE'", "alice")
        again = guard.query("SELECT major, SUM(income) FROM students GROUP BY major", "alice")
        assert len(built) == prepared and loads == []
    with Guard.open(POLICIES / "students.yaml", state=tmp_path / "cold") as guard:
        cold = guard.query("SELECT major, SUM(income) FROM students GROUP BY major", "alice")
    assert again.flags == cold.flags
