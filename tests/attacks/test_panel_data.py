"""Panel data (issue 16, family 1): one row per (person, year), so one person spans
several atoms. Person P is the only pilot in region R1, with a row for each of three
years; 8 clerks per region have one row a year. Four ordinary SUMs: by year 2020, by
year 2021, over R1's clerks, over R1. The first two only cut P's rows into three atoms;
the last two differ by P's total over the three years, a union of three atoms.

The same with three pilots and k = 4: the difference is the total of a 3-person group.

Each attack is first run against a pass-through (exact sums from the data) to show it
is real, then against the guard with the shipped defaults plus the history k."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from guard import Guard, GuardError

YEARS = (2020, 2021, 2022)
QUERIES = (
    "SELECT SUM(pay) FROM staff WHERE year = 2020",
    "SELECT SUM(pay) FROM staff WHERE year = 2021",
    "SELECT SUM(pay) FROM staff WHERE region = 'R1' AND job <> 'pilot'",
    "SELECT SUM(pay) FROM staff WHERE region = 'R1'",
)


def _data(tmp_path: Path, pilots: int) -> pd.DataFrame:
    rows = []
    for year in YEARS:
        for p in range(pilots):
            rows.append((f"pilot{p}", "R1", year, "pilot", 9000 + 100 * p + year % 10))
        for region in ("R1", "R2"):
            for c in range(8):
                rows.append((f"{region}clerk{c}", region, year, "clerk", 3000 + 37 * c + year % 7))
    frame = pd.DataFrame(rows, columns=["name", "region", "year", "job", "pay"])
    frame.to_csv(tmp_path / "staff.csv", index=False)
    return frame


def _policy(tmp_path: Path, k: int) -> Path:
    document = {
        "name": "panel",
        "protection": {"history": {"audit": "exact", "k": k}},
        "tables": {
            "staff": {
                "source": {"csv": str(tmp_path / "staff.csv")},
                "privacy_unit": "name",
                "columns": {
                    "name": {"role": "identifier"},
                    "region": {"role": "dimension"},
                    "year": {"role": "dimension"},
                    "job": {"role": "dimension"},
                    "pay": {"role": "measure", "bounds": [0, 20000]},
                },
            }
        },
        "analysts": {"alice": {}, "bob": {}},
    }
    path = tmp_path / "panel.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _pass_through(frame: pd.DataFrame) -> list[float]:
    return [
        float(frame[frame.year == 2020].pay.sum()),
        float(frame[frame.year == 2021].pay.sum()),
        float(frame[(frame.region == "R1") & (frame.job != "pilot")].pay.sum()),
        float(frame[frame.region == "R1"].pay.sum()),
    ]


@pytest.mark.parametrize(("pilots", "k"), [(1, 3), (3, 4)])
def test_the_attack_is_real_without_protection(tmp_path: Path, pilots: int, k: int) -> None:
    frame = _data(tmp_path, pilots)
    answers = _pass_through(frame)
    secret = float(frame[frame.job == "pilot"].pay.sum())
    assert answers[3] - answers[2] == secret
    assert frame[frame.job == "pilot"].name.nunique() < k


@pytest.mark.parametrize(("pilots", "k"), [(1, 3), (3, 4)])
@pytest.mark.parametrize("colluding", [False, True], ids=["one analyst", "two analysts"])
def test_the_panel_attack_fails(tmp_path: Path, pilots: int, k: int, colluding: bool) -> None:
    _data(tmp_path, pilots)
    answers: list[float | None] = []
    with Guard.open(_policy(tmp_path, k), state=tmp_path / "state") as guard:
        for i, sql in enumerate(QUERIES):
            analyst = "bob" if colluding and i % 2 else "alice"
            try:
                value = guard.query(sql, analyst).rows[0][0]
            except GuardError as refusal:
                assert "history audit" in str(refusal)
                value = None
            answers.append(None if value is None else float(value))
    # the two totals that differ by the pilots are never both released
    assert answers[2] is None or answers[3] is None
    # and what the audit withheld is the last step only: the first three are useful
    assert all(a is not None for a in answers[:2])
