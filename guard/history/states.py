"""What the history audit keeps per audit state, and its verdict on one answer (``screen.py``)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field

from pyroaring import BitMap

from guard.history.carry import PointCarry
from guard.history.controls import HistoryControl
from guard.history.groups import GroupSearch
from guard.history.keys import CellKey
from guard.history.sensitive import SensitiveSets
from guard.history.span import SpanAuditor
from guard.state.records import HistoryWrite

__all__ = ["MAX_IN_SPAN", "AuditState", "Screened"]

#: cells one audit state remembers as in its span, and as withheld (``AuditState.in_span``,
#: ``AuditState.held``), ~150 bytes each
MAX_IN_SPAN = 100_000


@dataclass
class AuditState:
    """One audit state: the span auditor and what the optional checks need."""

    auditor: SpanAuditor
    groups: GroupSearch
    #: the finest cells the rules flag (their totals and protection levels), if any
    sensitive: SensitiveSets | None = None
    released: list[BitMap] = field(default_factory=list)
    values: list[float | None] = field(default_factory=list)
    seen: set[bytes] = field(default_factory=set)
    #: query sets (fingerprints) a check withheld, and its control: withheld again
    #: unsearched, as releases only add to the span and values (what disclosed still would)
    withheld: dict[bytes, HistoryControl] = field(default_factory=dict)
    #: the feasible points of the last sensitive-set check, for the next (``carry.py``)
    carry: PointCarry = field(default_factory=PointCarry)
    #: (selection, cell key) of the query sets released or found implied in this state:
    #: asked again, they are implied (the span only grows), so not even their rows are
    #: read (``SpaceCells.selection`` names the data version and what the sets depend on)
    in_span: set[tuple[Hashable, CellKey]] = field(default_factory=set)
    #: the same for cells withheld, with their control and ``SpanAuditor.version`` then:
    #: asked again before anything changed, the check's every input is the same
    held: dict[tuple[Hashable, CellKey], tuple[HistoryControl, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Screened:
    """The audit's verdict on one answer: the (row, column) positions of the answer to
    withhold, a note saying which controls withheld them, and ``write``, what it
    released (persisted in the transaction of the answer's log row)."""

    write: HistoryWrite | None
    #: each withheld position and its control (its ``HistoryControl`` value, kept with it)
    controls: Mapping[tuple[int, int], str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def withheld(self) -> frozenset[tuple[int, int]]:
        return frozenset(self.controls)
