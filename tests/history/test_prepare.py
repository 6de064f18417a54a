"""Guard.prepare builds each audited table's history state before the first answer
(servers call it before they accept connections), so the first analyst does not pay
for it; answers are the same either way."""

from __future__ import annotations

from pathlib import Path

import pytest

from guard import Guard
from guard.history import finest

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
