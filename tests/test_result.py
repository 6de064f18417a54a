"""The protected answer is immutable: no stage can change another stage's decisions."""

from __future__ import annotations

import copy
import pickle

import pytest

from guard import Guard
from guard.result import Flag, ProtectedResult


def _answer() -> ProtectedResult:
    return ProtectedResult(["major", "n"], [["CS", 5], ["EE", 4]], [["released"] * 2] * 2, ["a note"])


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r.rows.__setitem__(0, ["x", 1]),
        lambda r: r.rows[0].__setitem__(1, None),
        lambda r: r.flags[1].__setitem__(1, "suppressed"),
        lambda r: r.notes.append("more"),
        lambda r: r.rows.append(["ZZ", 1]),
        lambda r: r.rows[0].pop(),
        lambda r: r.columns.clear(),
        lambda r: r.rows.sort(),
        lambda r: setattr(r, "rows", []),
    ],
)
def test_no_part_can_be_changed(change: object) -> None:
    result = _answer()
    assert callable(change)
    with pytest.raises((TypeError, AttributeError)):
        change(result)
    assert result.rows == [["CS", 5], ["EE", 4]] and result.notes == ["a note"]


def test_withholding_builds_a_new_answer() -> None:
    result = _answer()
    hidden = result.withholding([(1, 1)], ["1 value withheld"])
    assert hidden.rows == [["CS", 5], ["EE", None]]
    assert hidden.flags[1] == ["released", Flag.SUPPRESSED.value]
    assert hidden.notes == ["a note", "1 value withheld"]
    assert result.rows == [["CS", 5], ["EE", 4]]  # the original is unchanged
    assert result.withholding([]) is result


def test_still_plain_lists_to_callers() -> None:
    result = _answer()
    assert result.rows == [["CS", 5], ["EE", 4]] and isinstance(result.rows[0], list)
    assert pickle.loads(pickle.dumps(result)) == result
    assert copy.deepcopy(result).rows == result.rows
    assert result.to_pandas()["n"].tolist() == [5, 4]


def test_answers_of_the_guard_are_immutable(students: Guard) -> None:
    result = students.query("SELECT major, SUM(income) FROM students GROUP BY major", analyst="alice")
    with pytest.raises(TypeError):
        result.rows[0][1] = 0
