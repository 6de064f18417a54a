"""Dobkin-Jones-Lipton overlap control on the student table."""

from __future__ import annotations

import numpy as np
import pytest

from guard.history import OverlapControl, OverlapViolation, as_bitmap

from .conftest import RowsOf


def test_the_baker_pair_overlaps_too_much(rows_of: RowsOf) -> None:
    control = OverlapControl(max_overlap=1)
    assert control.violations(rows_of("major = 'EE'")) == []
    control.record(rows_of("major = 'EE'"), tag="q1")
    assert control.violations(rows_of("major = 'EE' AND sex = 'Male'")) == [OverlapViolation("q1", 3)]
    assert control.violations(rows_of("major = 'CS'")) == []  # disjoint GROUP BY cells pass
    assert control.violations(rows_of("sex = 'Female'")) == []  # shares only Baker


def test_repeats_are_exempt_and_stored_once(rows_of: RowsOf) -> None:
    control = OverlapControl(max_overlap=0)
    control.record(rows_of("major = 'EE'"))
    control.record(as_bitmap(rows_of("major IN ('EE')")))
    assert len(control) == 1
    assert control.violations(rows_of("major = 'EE'")[::-1]) == []


def test_limit_and_units(rows_of: RowsOf) -> None:
    control = OverlapControl(max_overlap=0)
    for i, major in enumerate(("CS", "EE")):
        control.record(rows_of(f"major = '{major}'"), tag=i)
    assert len(control.violations(rows_of("sex = 'Male'"))) == 2
    assert len(control.violations(rows_of("sex = 'Male'"), limit=1)) == 1

    household = np.arange(9)
    household[[2, 4, 7]] = 2  # Cook, Evans and Hall: one respondent
    by_unit = OverlapControl(max_overlap=1, unit_of_row=household)
    by_unit.record(rows_of("major = 'EE'"))
    assert by_unit.violations(rows_of("major = 'EE' AND sex = 'Male'")) == []  # 3 rows, 1 unit
    assert by_unit.violations(rows_of("class = 1980")) == []


def test_bad_configuration_is_explained() -> None:
    with pytest.raises(ValueError, match="max_overlap=-1 must be >= 0"):
        OverlapControl(max_overlap=-1)
