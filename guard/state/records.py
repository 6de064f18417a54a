"""What the state store keeps, as typed records: log rows and what an answer adds to the
history, the released-cell links and the noise ledger in the same transaction."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from typing import Any

__all__ = [
    "AuditedSet",
    "Draw",
    "HistoryWrite",
    "LedgerEntry",
    "LogRecord",
    "NoiseWrite",
    "Outcome",
    "Release",
    "ReleaseStatus",
    "fraction_from_text",
    "fraction_text",
]


class Outcome(Enum):
    """How a request ended, as the log's ``decision`` column says it."""

    ANSWERED = "answered"
    #: the shape is not allowed (QueryRejected)
    REJECTED = "rejected"
    #: answering would disclose, the budget is spent, or access is denied
    REFUSED = "refused"
    #: the policy, the engine or the store failed, or an internal error
    ERROR = "error"
    #: a query over protected answers: computed from the answers of its inner queries,
    #: each logged as its own request (``canonical`` lists their log ids)
    POST_PROCESSED = "post-processed"
    #: ``guard explain``: nothing was released
    EXPLAINED = "explained"
    #: a failed login at an endpoint (no query was run)
    LOGIN_FAILED = "login-failed"


class ReleaseStatus(Enum):
    """What became of one cell key of an answer, for the linked-table history."""

    PUBLISHED = "published"
    #: withheld by the cell suppression (a rule or a complementary cell)
    WITHHELD = "withheld"
    #: published by the cell suppression, withheld by the exact history audit: unknown
    #: to the analyst like any withheld cell, and withheld again for the same reason
    #: (this one: recorded before the audit's control was kept with it)
    WITHHELD_BY_HISTORY = "withheld-by-history"
    #: the same, with the control of the history audit that withheld it
    #: (``guard.history.controls.HistoryControl``), which a repeat's note names again
    HISTORY_EXHAUSTED = "withheld-by-history:exhausted"
    HISTORY_INTERVAL = "withheld-by-history:interval"
    HISTORY_OVERLAP = "withheld-by-history:overlap"
    HISTORY_SENSITIVE = "withheld-by-history:sensitive"
    HISTORY_SPAN = "withheld-by-history:span"
    HISTORY_UNMATCHED = "withheld-by-history:unmatched"

    @property
    def by_history(self) -> bool:
        """Withheld by the exact history audit (after the suppression published it)."""
        return self.value.startswith(ReleaseStatus.WITHHELD_BY_HISTORY.value)

    @property
    def control(self) -> str | None:
        """The history audit's control that withheld it, if recorded."""
        _, _, control = self.value.partition(":")
        return control if self.by_history and control else None

    @classmethod
    def by_control(cls, control: str) -> ReleaseStatus:
        """Withheld by the history audit's ``control`` (a ``HistoryControl`` value)."""
        return cls(f"{cls.WITHHELD_BY_HISTORY.value}:{control}")


@dataclass(frozen=True)
class LogRecord:
    """One request as it is logged. ``rows`` holds only released values."""

    analyst: str
    sql: str
    decision: Outcome
    canonical: str | None = None
    data_version: str | None = None
    error: str | None = None
    reason: str | None = None
    columns: list[str] | None = None
    rows: list[list[Any]] | None = None
    flags: list[list[str]] | None = None
    notes: list[str] | None = None
    elapsed_ms: float | None = None
    #: the grouping set of each row sent (``ProtectedResult.logged_levels``), for an answer
    #: of several grouping sets: the offline audit matches each row to the cell it was
    #: (a NULL key is a total or a real NULL group). None for other records, and in
    #: records written before the log kept it (their hashes do not cover it)
    levels: dict[str, list[Any]] | None = None


@dataclass(frozen=True)
class Release:
    """One cell key of an answer and whether it was published or withheld."""

    table: str
    space: str
    cell_key: str
    status: ReleaseStatus


@dataclass(frozen=True)
class AuditedSet:
    """One released query set as the state store keeps it."""

    space: str
    scope: str
    label: str
    #: the finest-cell ids, a serialized roaring bitmap
    cells: bytes
    #: the released value (read only by the partial-disclosure LP)
    value: float | None


@dataclass(frozen=True)
class HistoryWrite:
    """What an answer adds to the audit history, in the transaction of its log row."""

    data_version: str
    table: str
    sets: tuple[AuditedSet, ...]


@dataclass(frozen=True)
class LedgerEntry:
    """One charge, as persisted. ``sequence`` numbers charges 1, 2, ... in commit order."""

    sequence: int
    analyst: str
    epsilon: Fraction
    #: seconds since the epoch when the charge was made
    at: float
    #: free text tying the charge to its query (e.g. the query log id)
    note: str = ""
    #: per-account amounts that differ from ``epsilon`` (``"global"``, ``"group:<name>"``),
    #: e.g. 0 globally for an answer already drawn for another analyst
    accounts: tuple[tuple[str, Fraction], ...] = ()

    def amount(self, account: str) -> Fraction:
        """What this charge spent from ``account``."""
        return dict(self.accounts).get(account, self.epsilon)


@dataclass(frozen=True)
class Draw:
    """One released noisy statistic of one cell (the noise cache, ``guard.noise``): the
    cache key is built from the statistic, its bounds and the cell's canonical
    selection, never from the SQL text (see ``guard.noise.selection``)."""

    value: float
    #: noise scale in the statistic's unit
    scale: Fraction
    #: ε of the group it was drawn in
    epsilon: Fraction
    mechanism: str


@dataclass(frozen=True)
class NoiseWrite:
    """What a noisy answer adds to the store, in the transaction of its log row."""

    data_version: str
    table: str
    #: the budget charge (None when the answer repeats what the analyst received)
    charge: LedgerEntry | None
    #: new draws, by cache key
    draws: dict[str, Draw]
    #: cache keys the analyst receives for the first time
    received: list[str]


def fraction_text(value: Fraction) -> str:
    """``value`` exactly, as "num/den" (or "num")."""
    return str(value)


def fraction_from_text(text: str) -> Fraction:
    """Inverse of :func:`fraction_text`."""
    return Fraction(text)
