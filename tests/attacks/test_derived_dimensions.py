"""Differencing attacks through derived dimensions (issue 19).

A derived dimension is a dimension like any other: a band and its source column, or a
hierarchy level and the level below, select query sets whose difference can be one
person. Each attack is first shown on a pass-through (exact sums in pandas on the raw
data), then fails against the guard, whose history audit sees the query sets on rows.
A change of bands is a new data version of the same rows: answers under the old bands
still constrain answers under the new ones (also for bands of a measure, whose finest
cells move between versions). The offline audit finds the disclosure in a foreign log.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from guard import Guard, GuardError
from guard.audit.cellsets import GuardCells
from guard.audit.logsource import LogEntry
from guard.audit.offline import audit_log
from tests.backends.derived_people import people_frame, with_reference, write_people

RAW = with_reference(people_frame())
BAND = "SELECT SUM(income) FROM people WHERE age_band = '18-64'"
BAND_BUT_64 = "SELECT SUM(income) FROM people WHERE age_band = '18-64' AND age < 64"
UK = "SELECT SUM(income) FROM people WHERE country = 'UK'"
UK_BUT_WALES = "SELECT SUM(income) FROM people WHERE country = 'UK' AND region <> 'Wales'"
LOW = "SELECT SUM(income) FROM people WHERE income_band = 'low'"

# (first question, second question, the person isolated, pandas masks of the two sets)
ATTACKS: dict[str, tuple[str, str, str, Any, Any]] = {
    "a band and its source": (
        BAND,
        BAND_BUT_64,
        "P00",
        RAW.age_band == "18-64",
        (RAW.age_band == "18-64") & (RAW.age < 64),
    ),
    "a hierarchy level and the level below": (
        UK,
        UK_BUT_WALES,
        "P40",
        RAW.country == "UK",
        (RAW.country == "UK") & (RAW.region != "Wales"),
    ),
}


def _ask(policy: Path, state: Path, sql: str) -> float | None:
    with Guard.open(policy, state=state) as guard:
        try:
            result = guard.query(sql, "alice")
        except GuardError as refusal:
            assert "history audit" in str(refusal) or "query-set" in str(refusal), str(refusal)
            return None
    value, flag = result.rows[0][0], result.flags[0][0]
    return None if flag != "released" else float(value)


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_the_attack_is_real_without_protection(attack: str) -> None:
    _, _, victim, first, second = ATTACKS[attack]
    difference = RAW[first].income.sum() - RAW[second].income.sum()
    assert difference == RAW[RAW.pid == victim].income.iloc[0]


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_the_attack_fails(tmp_path: Path, attack: str) -> None:
    first, second, *_ = ATTACKS[attack]
    policy, state = write_people(tmp_path), tmp_path / "state"
    assert _ask(policy, state, first) is not None
    assert _ask(policy, state, second) is None
    # the same question asked of the source columns alone is refused too: one query set
    if attack == "a band and its source":
        assert _ask(policy, state, "SELECT SUM(income) FROM people WHERE age >= 18 AND age <= 63") is None


def _bands(upto: int) -> Callable[[dict[str, Any]], None]:
    """The middle band ends at ``upto`` and is labelled so: every row in it changes its
    derived value, none its stored ones."""

    def change(document: dict[str, Any]) -> None:
        document["tables"]["people"]["derived"]["age_band"]["bands"][1] = {
            "upto": upto,
            "label": f"18-{upto}",
        }

    return change


def _income_bands(below: int) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        bands = [{"below": below, "label": "low"}, {"label": "high"}]
        document["tables"]["people"]["derived"]["income_band"] = {"from": "income", "bands": bands}

    return change


def _with_twin() -> pd.DataFrame:
    """The people and a twin of P07 (same region, age and health; income 300): the two
    share every dimension but the income band under both versions' bands, and only a
    piece per (key in every version) keeps them apart."""
    frame = people_frame()
    twin = frame[frame.pid == "P07"].assign(pid="P41", income=300)
    return pd.concat([frame, twin], ignore_index=True)


TWIN = with_reference(_with_twin())

# (policy change before, after, the questions before / after, the person isolated, pandas
# masks before / after)
VERSIONS: dict[str, tuple[Any, Any, str, str, str, Any, Any]] = {
    "new bands of a dimension": (
        _bands(64),
        _bands(63),
        BAND,
        "SELECT SUM(income) FROM people WHERE age_band = '18-63'",
        "P00",
        TWIN.age.between(18, 64),
        TWIN.age.between(18, 63),
    ),
    # the finest cells split by income_band: the person at 500 moves from "high" to
    # "low", so one version's cells alone would join rows the other tells apart
    "new bands of a measure": (
        _income_bands(500),
        _income_bands(501),
        LOW,
        LOW,
        "P07",
        TWIN.income < 500,
        TWIN.income < 501,
    ),
}


@pytest.mark.parametrize("change", list(VERSIONS))
def test_the_attack_across_a_change_of_bands_is_real_without_protection(change: str) -> None:
    *_, victim, before, after = VERSIONS[change]
    difference = abs(TWIN[after].income.sum() - TWIN[before].income.sum())
    assert difference == TWIN[TWIN.pid == victim].income.iloc[0]


@pytest.mark.parametrize("change", list(VERSIONS))
def test_answers_under_old_bands_constrain_the_new_ones(tmp_path: Path, change: str) -> None:
    before, after, first, second, *_ = VERSIONS[change]
    state, frame = tmp_path / "state", _with_twin()
    assert _ask(write_people(tmp_path / "v1", frame, change=before), state, first) is not None
    assert _ask(write_people(tmp_path / "v2", frame, change=after), state, second) is None


def test_an_unrelated_change_of_bands_keeps_answers_answerable(tmp_path: Path) -> None:
    """Only the rows whose band moves make a difference: with the same rows in the same
    band, the earlier answer is simply given again."""
    state = tmp_path / "state"
    same = "SELECT SUM(income) FROM people WHERE age_band = '0-17'"
    first = _ask(write_people(tmp_path / "v1", change=_bands(64)), state, same)
    assert first is not None
    assert _ask(write_people(tmp_path / "v2", change=_bands(63)), state, same) == first


def test_the_offline_audit_finds_the_hierarchy_attack_in_a_foreign_log(tmp_path: Path) -> None:
    policy = write_people(tmp_path)
    log = [
        LogEntry(i, f"test:{i}", "mallory", None, sql) for i, sql in enumerate((UK, UK_BUT_WALES), start=1)
    ]
    with Guard.open(policy, state=tmp_path / "state") as guard:
        cells = GuardCells(guard.policy, guard.backend)
        result = audit_log(log, cells, 3, random_bytes=random.Random(7).randbytes)
    found = [d for d in result.determined if d.disclosure]
    assert len(found) == 1 and found[0].units == 1
    description = found[0].description
    assert description is not None and description["region"] == "Wales" and description["country"] == "UK"


def test_the_pass_through_frame_is_what_the_guard_loads() -> None:
    """The reference frame holds the people the policy's CSV holds (guards the masks)."""
    frame = people_frame()
    assert len(frame) == 41 and frame.pid.is_unique
    assert int((frame.age == 64).sum()) == 1 and int((frame.income == 500).sum()) == 1
    assert int((frame.region == "Wales").sum()) == 1 and pd.isna(frame.age).sum() == 1
