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


def test_logged_rows_are_the_sent_rows_with_nan_named() -> None:
    """The log keeps what ``to_dict`` sends, value for value and type for type: a NaN
    (Python's or numpy's) named "NaN" in both (the NULL group is null), except an
    infinity, a float in the log and "Infinity" / "-Infinity" in the answer (JSON has
    no infinity: json.dumps would write a token strict parsers reject)."""
    import datetime as dt
    import math

    import numpy as np

    values = [1, "x", None, True, 2.5, -0.0, math.inf, math.nan, np.float64("nan"), np.float64(3.0)]
    values += [np.float32("nan"), np.int64(4), dt.date(2020, 1, 2), dt.datetime(2020, 1, 2, 3, 4)]
    result = ProtectedResult(["v"], [[v] for v in values], [["released"]] * len(values))
    sent = [row[0] for row in result.to_dict()["rows"]]
    for value, logged, shown in zip(values, [row[0] for row in result.logged_rows()], sent, strict=True):
        if isinstance(value, float | np.floating) and math.isnan(value):
            assert logged == "NaN" and shown == "NaN"
        elif isinstance(value, float) and math.isinf(value):
            assert logged == value and shown == ("Infinity" if value > 0 else "-Infinity")
        else:
            assert logged == shown and type(logged) is type(shown)


def test_the_json_answer_is_strict_json_and_keeps_nan_apart_from_null() -> None:
    """A NaN group and the NULL group stay two groups in the JSON answer, and no value
    is written as a token (NaN, Infinity) that strict parsers (JavaScript's
    JSON.parse) reject."""
    import json
    import math

    result = ProtectedResult(
        ["x", "n"],
        [[None, 3], [math.nan, 4], [math.inf, math.nan], [-math.inf, 5]],
        [["released"] * 2] * 4,
    )

    def strict(token: str) -> None:
        raise ValueError(f"not JSON: {token}")

    rows = json.loads(result.to_json(), parse_constant=strict)["rows"]
    assert [row[0] for row in rows] == [None, "NaN", "Infinity", "-Infinity"]
    assert rows[2][1] == "NaN"
