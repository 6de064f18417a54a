"""Why the history audit withheld a value: the closed set of its controls, and the
words of its refusals and notes (shared by the screen and its tests)."""

from __future__ import annotations

from enum import Enum

__all__ = ["HistoryControl", "control_text", "note", "ordered", "refusal"]


class HistoryControl(Enum):
    """The check of the history audit that withheld a value."""

    EXHAUSTED = "exhausted"
    INTERVAL = "interval"
    OVERLAP = "overlap"
    SENSITIVE = "sensitive"
    SPAN = "span"
    UNMATCHED = "unmatched"


def ordered(controls: set[HistoryControl]) -> list[HistoryControl]:
    return sorted(controls, key=lambda c: c.value)


_CONTROL_TEXT = {
    HistoryControl.SPAN: "exact history audit: with answers already given, it would reveal the total of "
    "a group of fewer than k={k} respondents",
    HistoryControl.OVERLAP: "overlap control: its rows overlap an earlier answer's by more than the policy "
    "allows",
    HistoryControl.SENSITIVE: "exact history audit: with answers already given, it would reveal the "
    "total of a cell that the sensitivity rules protect",
    HistoryControl.UNMATCHED: "history audit: it cannot tell which rows the cell covers",
    HistoryControl.EXHAUSTED: "exact history audit: the search for a group of fewer than k={k} respondents "
    "its release could isolate did not finish within its budget, so it is withheld",
    HistoryControl.INTERVAL: "partial-disclosure audit: with answers already given, it would pin the total "
    "of a group of fewer than k={k} respondents to too narrow an interval",
}


def refusal(controls: list[HistoryControl], k: int) -> str:
    reasons = "; ".join(_CONTROL_TEXT[c].format(k=k) for c in controls)
    return (
        f"refused by the {reasons}. Ask about groups that differ from earlier questions by at least "
        f"k={k} respondents, or group by fewer dimensions"
    )


def note(withheld: int, controls: list[HistoryControl], k: int) -> str:
    reasons = "; ".join(_CONTROL_TEXT[c].format(k=k) for c in controls)
    return f"{withheld} value(s) withheld by the {reasons}"


def control_text(control: str, k: int) -> str:
    """The words of one control (a :class:`HistoryControl` value), as its notes say it."""
    return _CONTROL_TEXT[HistoryControl(control)].format(k=k)
