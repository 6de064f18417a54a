"""A cell the history audit withheld is recorded with the audit's control, so that a
repeat names it again; one recorded before (no control) is still withheld by it."""

from __future__ import annotations

import pytest

from guard.history.controls import HistoryControl
from guard.state.records import ReleaseStatus


@pytest.mark.parametrize("control", list(HistoryControl))
def test_each_control_is_a_status_withheld_by_the_history_audit(control: HistoryControl) -> None:
    status = ReleaseStatus.by_control(control.value)
    assert status.by_history and status.control == control.value
    assert ReleaseStatus(status.value) is status  # what the store reads back


def test_the_other_statuses() -> None:
    assert ReleaseStatus.WITHHELD_BY_HISTORY.by_history
    assert ReleaseStatus.WITHHELD_BY_HISTORY.control is None  # recorded without its control
    for status in (ReleaseStatus.PUBLISHED, ReleaseStatus.WITHHELD):
        assert not status.by_history and status.control is None
    # every member is one of those: the published, the suppression's, or the audit's
    assert {s for s in ReleaseStatus if s.by_history} == {
        ReleaseStatus.WITHHELD_BY_HISTORY,
        *(ReleaseStatus.by_control(c.value) for c in HistoryControl),
    }
