"""Sensitive cells recovered from later totals (issue 16, family 2).

On the shipped castro policy: margins by municipality, the same over profession IN
('P1','P2','P4','P5'), margins by profession over municipality IN ('M1','M2'), and
margins by profession together give the dominated cell (M3, P5) exactly. And a cell the
p% / dominance rule withholds is the difference of two totals (dept, then dept without
one grade). Each attack is run on a pass-through to show it is real, then against the
guard: the cell's total never becomes derivable from what the guard releases (checked
with an exact rational span over the released query sets, not with the guard)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from guard import Guard, GuardError
from tests.history.oracle import RationalSpan

ROOT = Path(__file__).resolve().parents[2]
CASTRO = [
    "SELECT municipality, SUM(salary) FROM castro GROUP BY municipality",
    "SELECT municipality, SUM(salary) FROM castro WHERE profession IN ('P1', 'P2', 'P4', 'P5') "
    "GROUP BY municipality",
    "SELECT profession, SUM(salary) FROM castro WHERE municipality IN ('M1', 'M2') GROUP BY profession",
    "SELECT profession, SUM(salary) FROM castro GROUP BY profession",
]


def _castro(tmp_path: Path) -> tuple[Path, pd.DataFrame]:
    csv = next((ROOT / "examples/castro").glob("*.csv"))
    shutil.copy(csv, tmp_path / "castro.csv")
    document = yaml.safe_load((ROOT / "policies/castro.yaml").read_text())
    next(iter(document["tables"].values()))["source"] = {"csv": str(tmp_path / "castro.csv")}
    document.pop("state", None)
    policy = tmp_path / "castro.yaml"
    policy.write_text(yaml.safe_dump(document))
    return policy, pd.read_csv(tmp_path / "castro.csv")


def _sets(frame: pd.DataFrame, sql: str) -> dict[str, frozenset[int]]:
    """The query set of each cell of one of the CASTRO questions, from the data."""
    chosen = frame
    if "IN ('P1'" in sql:
        chosen = chosen[chosen.profession.isin(["P1", "P2", "P4", "P5"])]
    if "IN ('M1'" in sql:
        chosen = chosen[chosen.municipality.isin(["M1", "M2"])]
    by = "municipality" if sql.startswith("SELECT municipality") else "profession"
    return {str(k): frozenset(g.index.tolist()) for k, g in chosen.groupby(by)}


def test_the_castro_attack_is_real_without_protection(tmp_path: Path) -> None:
    _, frame = _castro(tmp_path)
    span = RationalSpan(len(frame))
    for sql in CASTRO:
        for rows in _sets(frame, sql).values():
            span.add(rows)
    target = frozenset(frame[(frame.municipality == "M3") & (frame.profession == "P5")].index.tolist())
    assert span.contains(target)
    assert float(frame.loc[list(target)].salary.sum()) == 363


@pytest.mark.parametrize("colluding", [False, True], ids=["one analyst", "two analysts"])
def test_the_castro_attack_fails(tmp_path: Path, colluding: bool) -> None:
    policy, frame = _castro(tmp_path)
    span = RationalSpan(len(frame))
    with Guard.open(policy, state=tmp_path / "state") as guard:
        for i, sql in enumerate(CASTRO):
            analyst = "bob" if colluding and i % 2 else "alice"
            try:
                result = guard.query(sql, analyst)
            except GuardError:
                continue
            sets = _sets(frame, sql)
            for row in result.rows:
                if row[1] is not None:
                    span.add(sets[str(row[0])])
    target = frozenset(frame[(frame.municipality == "M3") & (frame.profession == "P5")].index.tolist())
    assert not span.contains(target)


def _staff(tmp_path: Path) -> tuple[Path, pd.DataFrame]:
    rows = []
    for dept in (1, 2):
        for grade in range(1, 10):
            for i in range(4):
                pay = 90000 if (dept, grade, i) == (1, 9, 0) else 1000 + 10 * grade + i
                rows.append((f"d{dept}g{grade}p{i}", dept, grade, pay))
    frame = pd.DataFrame(rows, columns=["person", "dept", "grade", "pay"])
    frame.to_csv(tmp_path / "staff.csv", index=False)
    document = {
        "name": "staff",
        "protection": {"rules": [{"p_percent": {"p": 10}}]},
        "tables": {
            "staff": {
                "source": {"csv": str(tmp_path / "staff.csv")},
                "privacy_unit": "person",
                "columns": {
                    "person": {"role": "identifier"},
                    "dept": {"role": "dimension"},
                    "grade": {"role": "dimension"},
                    "pay": {"role": "measure", "bounds": [0, 200000]},
                },
            }
        },
        "analysts": {"alice": {}},
    }
    policy = tmp_path / "staff.yaml"
    policy.write_text(yaml.safe_dump(document))
    return policy, frame


DIFFERENCE = (
    "SELECT SUM(pay) FROM staff WHERE dept = 1",
    "SELECT SUM(pay) FROM staff WHERE dept = 1 AND grade <> 9",
)


def test_the_difference_attack_is_real_without_protection(tmp_path: Path) -> None:
    _, frame = _staff(tmp_path)
    first = frame[frame.dept == 1].pay.sum()
    second = frame[(frame.dept == 1) & (frame.grade != 9)].pay.sum()
    cell = frame[(frame.dept == 1) & (frame.grade == 9)]
    assert first - second == cell.pay.sum()
    # the cell is one the p% rule protects: its largest contributor learns the others
    top, *others = sorted(cell.pay, reverse=True)
    assert sum(others) < 0.1 * top


def test_the_difference_attack_fails(tmp_path: Path) -> None:
    policy, _ = _staff(tmp_path)
    answers = []
    with Guard.open(policy, state=tmp_path / "state") as guard:
        # nobody asked for the cell: the two totals alone would give it
        for sql in DIFFERENCE:
            try:
                answers.append(guard.query(sql, "alice").rows[0][0])
            except GuardError as refusal:
                assert "sensitivity rules" in str(refusal)
                answers.append(None)
    assert None in answers
    with Guard.open(policy, state=tmp_path / "other") as guard:
        cell = guard.query("SELECT grade, SUM(pay) FROM staff WHERE dept = 1 GROUP BY grade", "alice")
        assert [r[1] for r in cell.rows if r[0] == 9] == [None]  # a table withholds the cell too


NARROWING = (
    "SELECT SUM(pay) FROM staff WHERE dept = 1",
    "SELECT SUM(pay) FROM staff WHERE dept = 1 AND grade IN (1, 2, 3, 4, 5, 6, 7)",
)


def _interval(
    frame: pd.DataFrame, answers: list[tuple[pd.Series, float]], target: pd.Series
) -> tuple[float, float]:
    """[min, max] of the target rows' total given exact SUMs over row masks, each row's
    pay within the declared bounds [0, 200000]: an LP independent of the guard."""
    from scipy.optimize import linprog

    a_eq = [mask.to_numpy(dtype=float) for mask, _ in answers]
    b_eq = [value for _, value in answers]
    objective = target.to_numpy(dtype=float)
    ends = []
    for sign in (1.0, -1.0):
        solved = linprog(sign * objective, A_eq=a_eq, b_eq=b_eq, bounds=[(0, 200000)] * len(frame))
        ends.append(sign * solved.fun)
    return ends[0], ends[1]


def test_narrowing_a_protected_cell_is_real_without_protection(tmp_path: Path) -> None:
    _, frame = _staff(tmp_path)
    first = frame.dept == 1
    second = first & ~frame.grade.isin([8, 9])
    answers = [(first, float(frame[first].pay.sum())), (second, float(frame[second].pay.sum()))]
    target = first & (frame.grade == 9)
    total = float(frame[target].pay.sum())
    top, *others = sorted(frame[target].pay, reverse=True)
    upper_level = 0.1 * top - sum(others)  # the p% rule's upper protection level
    _, high = _interval(frame, answers, target)
    assert high - total < upper_level  # not recovered exactly, but pinned too closely


def test_narrowing_a_protected_cell_fails(tmp_path: Path) -> None:
    policy, frame = _staff(tmp_path)
    released = []
    with Guard.open(policy, state=tmp_path / "state") as guard:
        for sql, mask in zip(
            NARROWING, (frame.dept == 1, (frame.dept == 1) & ~frame.grade.isin([8, 9])), strict=True
        ):
            try:
                value = guard.query(sql, "alice").rows[0][0]
            except GuardError as refusal:
                assert "sensitivity rules" in str(refusal)
                continue
            released.append((mask, float(value)))
    target = (frame.dept == 1) & (frame.grade == 9)
    total = float(frame[target].pay.sum())
    top, *others = sorted(frame[target].pay, reverse=True)
    _, high = _interval(frame, released, target)
    assert high - total >= 0.1 * top - sum(others) - 1e-6


NARROWING_BY_AVERAGES = (
    "SELECT COUNT(*), AVG(pay) FROM staff WHERE dept = 1",
    "SELECT COUNT(*), AVG(pay) FROM staff WHERE dept = 1 AND grade IN (1, 2, 3, 4, 5, 6, 7)",
)


def test_narrowing_by_averages_and_counts_fails(tmp_path: Path) -> None:
    """The same narrowing with AVG and COUNT: average x count is the sum, so the LP must
    count averages as the sums they state (it used to skip them)."""
    policy, frame = _staff(tmp_path)
    released = []
    masks = (frame.dept == 1, (frame.dept == 1) & ~frame.grade.isin([8, 9]))
    with Guard.open(policy, state=tmp_path / "state") as guard:
        for sql, mask in zip(NARROWING_BY_AVERAGES, masks, strict=True):
            try:
                count, average = guard.query(sql, "alice").rows[0]
            except GuardError as refusal:
                assert "sensitivity rules" in str(refusal)
                continue
            if count is not None and average is not None:
                released.append((mask, float(count) * float(average)))
    target = (frame.dept == 1) & (frame.grade == 9)
    total = float(frame[target].pay.sum())
    top, *others = sorted(frame[target].pay, reverse=True)
    _, high = _interval(frame, released, target)
    assert high - total >= 0.1 * top - sum(others) - 1e-6
