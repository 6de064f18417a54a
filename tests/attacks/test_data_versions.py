"""Data changes must not reset the history (issue 16, family 4).

The students table: SUM(income) for EE is answered; the same without class 1980 (that
is, without Baker) is refused. The data then changes and the guard reopens on the same
state folder. Each change below makes a difference across versions that isolates one
student; the attack is first shown on a pass-through (exact sums from the two CSVs),
then fails against the guard. Answers that the change does not touch stay answerable."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
import yaml

from guard import Guard, GuardError

ROOT = Path(__file__).resolve().parents[2]
EE = "SELECT SUM(income) FROM students WHERE major = 'EE'"
EE_BUT_1980 = "SELECT SUM(income) FROM students WHERE major = 'EE' AND class <> 1980"


def _setup(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "examples/students/students.csv", tmp_path / "students.csv")
    document = yaml.safe_load((ROOT / "policies/students.yaml").read_text())
    document["tables"]["students"]["source"] = {"csv": str(tmp_path / "students.csv")}
    document.pop("state", None)
    policy = tmp_path / "students.yaml"
    policy.write_text(yaml.safe_dump(document))
    return policy


def _ask(policy: Path, state: Path, sql: str) -> float | None:
    with Guard.open(policy, state=state) as guard:
        try:
            value = guard.query(sql, "alice").rows[0][0]
        except GuardError as refusal:
            assert "history audit" in str(refusal) or "query-set" in str(refusal), str(refusal)
            return None
    return None if value is None else float(value)


def _append(frame: pd.DataFrame) -> pd.DataFrame:
    extra = pd.DataFrame([["Jones", "Male", "CS", 1982, 55000]], columns=frame.columns)
    return pd.concat([frame, extra], ignore_index=True)


def _append_ee(frame: pd.DataFrame) -> pd.DataFrame:
    extra = pd.DataFrame([["Kim", "Female", "EE", 1982, 58000]], columns=frame.columns)
    return pd.concat([frame, extra], ignore_index=True)


def _raise_baker(frame: pd.DataFrame) -> pd.DataFrame:
    changed = frame.copy()
    changed.loc[changed.name == "Baker", "income"] = 52000
    return changed


def _drop_baker(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame.name != "Baker"].reset_index(drop=True)


# (change, question before the change, question after it, the student isolated)
ATTACKS: dict[str, tuple[Callable[[pd.DataFrame], pd.DataFrame], str, str, str]] = {
    "unrelated row appended": (_append, EE, EE_BUT_1980, "Baker"),
    "Baker's income changed": (_raise_baker, EE, EE_BUT_1980, "Baker"),
    "Baker deleted": (_drop_baker, EE, EE, "Baker"),
    "one EE student appended": (_append_ee, EE, EE, "Kim"),
}


def _sum(frame: pd.DataFrame, sql: str) -> float:
    chosen = frame[frame.major == "EE"]
    if "1980" in sql:
        chosen = chosen[chosen["class"] != 1980]
    return float(chosen.income.sum())


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_the_attack_is_real_without_protection(tmp_path: Path, attack: str) -> None:
    change, before_sql, after_sql, victim = ATTACKS[attack]
    before = pd.read_csv(ROOT / "examples/students/students.csv")
    after = change(before)
    difference = abs(_sum(before, before_sql) - _sum(after, after_sql))
    both = pd.concat([before, after])
    assert difference == float(both[both.name == victim].income.iloc[0])


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_the_attack_fails_across_versions(tmp_path: Path, attack: str) -> None:
    change, before_sql, after_sql, _ = ATTACKS[attack]
    policy, state = _setup(tmp_path), tmp_path / "state"
    assert _ask(policy, state, before_sql) is not None
    frame = pd.read_csv(tmp_path / "students.csv")
    change(frame).to_csv(tmp_path / "students.csv", index=False)
    assert _ask(policy, state, after_sql) is None


def test_a_refusal_stays_a_refusal_and_untouched_answers_stay(tmp_path: Path) -> None:
    policy, state = _setup(tmp_path), tmp_path / "state"
    assert _ask(policy, state, EE) is not None
    assert _ask(policy, state, EE_BUT_1980) is None
    frame = pd.read_csv(tmp_path / "students.csv")
    _append(frame).to_csv(tmp_path / "students.csv", index=False)
    assert _ask(policy, state, EE_BUT_1980) is None
    assert _ask(policy, state, EE) == 240000.0  # the same rows: implied, answered again
    assert _ask(policy, state, "SELECT SUM(income) FROM students WHERE major = 'CS'") is not None


def test_a_changed_value_is_not_revealed_by_the_same_total_again(tmp_path: Path) -> None:
    """SUM(EE) before and after Baker's raise differ by the raise: two values of one
    respondent, a group of one. Real on a pass-through; the guard refuses the second."""
    before = pd.read_csv(ROOT / "examples/students/students.csv")
    after = _raise_baker(before)
    assert _sum(after, EE) - _sum(before, EE) == 2000.0
    policy, state = _setup(tmp_path), tmp_path / "state"
    assert _ask(policy, state, EE) == 240000.0
    after.to_csv(tmp_path / "students.csv", index=False)
    assert _ask(policy, state, EE) is None
