"""``normalized`` names a key value as it reads after a round trip through the JSON log
(the online audit and the offline replay must name cells alike). Strings, ints and None
skip the round trip: the oracle here is the round trip itself, as the log makes it (an
answer's row as the log record holds it, encoded as the log row stores it, read back as
JSON), on every kind of value a group key can hold. A float NaN (Python's or numpy's)
is logged as the text ``"NaN"``: JSON has no NaN, and null names the NULL group, which
the engine's GROUP BY keeps apart from the NaN group (``test_nan_keys.py``)."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from guard.history.keys import normalized
from guard.result import ProtectedResult
from guard.state.records import LogRecord, Outcome
from guard.state.writes import encoded_fields


def _round_trip(value: Any) -> Any:
    """``value`` as a group key of a logged answer reads back from the log."""
    answer = ProtectedResult(["key"], [[value]], [["released"]])
    record = LogRecord(analyst="a", sql="q", decision=Outcome.ANSWERED, rows=answer.logged_rows())
    return json.loads(encoded_fields(record)["rows"])[0][0]


_values = st.one_of(
    st.text(),  # every code point, lone surrogates and NUL included
    st.integers(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.none(),
    st.booleans(),
    st.floats(),  # NaN, infinities and -0.0 included
    st.floats().map(np.float64),
    st.floats(width=32).map(np.float32),
    st.sampled_from([float("nan"), -float("nan"), np.nan, np.float32("nan"), pd.NaT, pd.NA]),
    st.decimals(allow_nan=False, allow_infinity=False),
    st.dates(),
    st.datetimes(),
)


@given(_values)
def test_a_key_value_reads_as_after_the_json_round_trip(value: Any) -> None:
    expected = _round_trip(value)
    got = normalized(value)
    assert got == expected  # a name equals itself: NaN's too
    assert type(got) is type(expected)
    assert normalized(expected) == got  # the replay names the logged value alike


def test_nan_has_one_name_apart_from_null() -> None:
    nans = [float("nan"), -float("nan"), float("inf") - float("inf"), np.float64("nan"), np.float32("nan")]
    assert {normalized(v) for v in nans} == {"NaN"}
    assert normalized(None) is None and (normalized(float("inf")), normalized(-0.0)) == (math.inf, 0.0)


def test_the_values_that_change_in_the_round_trip_still_change() -> None:
    # bool stays bool, a float that is an integer stays a float, a date becomes text
    assert normalized(True) is True
    assert normalized(2.0) == 2.0 and type(normalized(2.0)) is float
    assert normalized(dt.date(2024, 1, 2)) == "2024-01-02"
    assert normalized(Decimal("1.50")) == "1.50"
    assert normalized("\ud800") == "\ud800"
