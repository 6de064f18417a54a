"""``normalized`` names a key value as it reads after a round trip through the JSON log
(the online audit and the offline replay must name cells alike). Strings, ints and None
skip the round trip: the oracle here is the round trip itself, as the log makes it (an
answer's row as the log record holds it, encoded as the log row stores it, read back as
JSON), on every kind of value a group key can hold."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from guard.history.keys import normalized
from guard.result import ProtectedResult
from guard.state.records import LogRecord, Outcome
from guard.state.writes import encoded_fields


def _round_trip(value: Any) -> Any:
    """``value`` as a group key of a logged answer reads back from the log."""
    answer = ProtectedResult(["key"], [[value]], [["released"]])
    record = LogRecord(analyst="a", sql="q", decision=Outcome.ANSWERED, rows=answer.to_dict()["rows"])
    return json.loads(encoded_fields(record)["rows"])[0][0]


_values = st.one_of(
    st.text(),  # every code point, lone surrogates and NUL included
    st.integers(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.decimals(allow_nan=False, allow_infinity=False),
    st.dates(),
    st.datetimes(),
)


@given(_values)
def test_a_key_value_reads_as_after_the_json_round_trip(value: Any) -> None:
    expected = _round_trip(value)
    got = normalized(value)
    assert got == expected
    assert type(got) is type(expected)


def test_the_values_that_change_in_the_round_trip_still_change() -> None:
    # bool stays bool, a float that is an integer stays a float, a date becomes text
    assert normalized(True) is True
    assert normalized(2.0) == 2.0 and type(normalized(2.0)) is float
    assert normalized(dt.date(2024, 1, 2)) == "2024-01-02"
    assert normalized(Decimal("1.50")) == "1.50"
    assert normalized("\ud800") == "\ud800"
