"""``guard explain`` shows what the history audit would withhold, and releases nothing
(guard.history.preview).

The oracle is the query path itself: on one state, each question is explained and then
asked, and the explanation's answer must be the answer (the same values withheld, a
refusal shown as every value withheld). Decoy questions, explained and never asked,
sit between them: a second guard on the same data asks the same questions without any
explanation, and every answer must be the same, so explaining released nothing into the
history (the decoys would otherwise have withheld more of the later answers).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from guard import Guard
from guard.errors import QueryRefused
from guard.history.controls import HistoryControl, control_text
from guard.history.screen import HistoryScreen
from guard.result import Flag

from .history_helpers import STUDENTS_CSV, students_policy, unlinked
from .skewed import DIMENSIONS, skewed_table

_WITHHELD = Flag.SUPPRESSED.value
CONTROLS = tuple(control_text(c.value, 3) for c in HistoryControl)


def _policy(folder: Path, seed: int) -> Path:
    return skewed_table(folder, seed, 160)[0]


def _question(rng: np.random.Generator) -> str:
    names = list(DIMENSIONS)
    conditions = []
    for name in rng.choice(names, int(rng.integers(0, 3)), replace=False).tolist():
        values = DIMENSIONS[name]
        if rng.random() < 0.5:
            conditions.append(f"{name} = '{values[int(rng.integers(len(values)))]}'")
        else:
            conditions.append(f"{name} <> '{values[int(rng.integers(len(values)))]}'")
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    if rng.random() < 0.4:
        group = names[int(rng.integers(len(names)))]
        return f"SELECT {group}, SUM(m), COUNT(*) FROM t{where} GROUP BY {group}"
    return f"SELECT SUM(m), COUNT(*) FROM t{where}"


def _answer(guard: Guard, sql: str) -> tuple[object, ...]:
    try:
        result = guard.query(sql, "alice")
    except QueryRefused as refused:
        return ("refused", str(refused))
    return ("answered", result.rows, result.flags)


@pytest.mark.parametrize("seed", range(3))
def test_explain_withholds_what_the_query_would_and_releases_nothing(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ways of previewing: one-value-per-state answers on the live states without
    releasing, others on states rebuilt from the store (``HistoryScreen.shadow``)."""
    shadows = [0]
    shadow = HistoryScreen.shadow

    def counted(self: HistoryScreen) -> HistoryScreen:
        shadows[0] += 1
        return shadow(self)

    monkeypatch.setattr(HistoryScreen, "shadow", counted)
    path = _policy(tmp_path, seed)
    rng = np.random.default_rng(100 + seed)
    questions = [(_question(rng), _question(rng)) for _ in range(25)]  # (asked, decoy)
    shown = 0
    with Guard.open(path, state=tmp_path / "explained") as guard:
        answers = []
        for asked, decoy in questions:
            with contextlib.suppress(QueryRefused):  # refused by the cell protection, as before
                guard.explain(decoy, "alice")
            try:
                explained = guard.explain(asked, "alice")
            except QueryRefused:
                explained = None
            answer = _answer(guard, asked)
            answers.append(answer)
            if explained is None:
                assert answer[0] == "refused"
                continue
            held = [c for c in explained.cells if c.status.startswith("exact history audit")]
            shown += len(held)
            if answer[0] == "refused":
                # every value would be withheld: explain shows each, with its control
                values = [f for row in explained.result.flags for f in row[-2:]]
                assert values and all(f == _WITHHELD for f in values)
                assert bool(held) == ("history audit" in str(answer[1]))
            else:
                assert (explained.result.rows, explained.result.flags) == answer[1:]
                assert len(held) == sum(
                    note.startswith(f"{len(held)} value(s) withheld by the")
                    for note in explained.result.notes
                ) * len(held)
    with Guard.open(path, state=tmp_path / "asked") as guard:
        assert [_answer(guard, asked) for asked, _ in questions] == answers
    assert shown >= 3, "the sequences reach the history audit"
    assert 0 < shadows[0] < 2 * len(questions), "both ways of previewing are taken"
    assert sum(a[0] == "answered" for a in answers) >= 10


def test_baker_explained_names_the_span_control_and_stays_refused(tmp_path: Path) -> None:
    """Seed 002's pair: after SUM(income) of EE, the same for male EE students is Baker's
    income. Explained, it is withheld by the span control, with what the EE total leaves of it; the
    query is still refused afterwards, and nothing the explanation saw was released."""
    path = students_policy(tmp_path, unlinked)
    men = "SELECT SUM(income) FROM students WHERE major = 'EE' AND sex = 'Male'"
    with Guard.open(path, state=tmp_path / "state") as guard:
        assert guard.explain(men, "alice").cells == ()  # nothing asked yet: nothing to withhold
        assert guard.query("SELECT SUM(income) FROM students WHERE major = 'EE'", "alice").rows == [[240000]]
        explained = guard.explain(men, "alice")
        assert explained.result.rows == [[None]] and explained.result.flags == [[_WITHHELD]]
        (cell,) = explained.cells
        assert cell.cell.startswith("all rows (where") and cell.quantity == "sum(income)"
        assert cell.status.startswith("exact history audit: with answers already given")
        # what the EE total leaves of it: the men's box [0, 3 x 200,000] cut by 240,000
        # minus the one woman's [0, 200,000] (checked on the raw data below)
        assert (cell.low, cell.high, cell.meets) == (40000.0, 240000.0, None)
        assert any("history audit" in note for note in explained.result.notes)
        assert "190000" not in repr(explained.result.rows)
        with pytest.raises(QueryRefused, match="history audit"):
            guard.query(men, "alice")
        statuses = [entry["decision"] for entry in guard.log()]
    assert statuses.count("explained") == 2
    # the withheld value is what completes the pair on the raw data: Baker alone
    data = pd.read_csv(STUDENTS_CSV)
    ee = data[data.major == "EE"]
    assert ee.income.sum() == 240000 and (ee.sex == "Female").sum() == 1
    high = yaml.safe_load(path.read_text())["tables"]["students"]["columns"]["income"]["bounds"][1]
    assert (240000 - high * (ee.sex == "Female").sum(), 240000) == (40000, 240000)
