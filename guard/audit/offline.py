"""The offline audit: replay a query log and report every disclosure its answers allow.

Each answered entry's released cells are fed, in log order, to one exact span auditor
(``span.py``) per (table, space): ``sum(m)`` for SUM/AVG of measure m, ``count`` for
counts (``cellsets.py`` says why). A group of rows whose total the answers determine is
recorded; it is a *disclosure* when it holds fewer than k privacy units (k, the
policy's ``min_query_set_size``), whatever the sizes of the cells that were combined.

Two kinds of group are recorded, each once (by its row set):

- every atom that becomes derivable. Before each cell is released the auditor says
  which atoms it would make derivable (``would_disclose`` with every atom treated as
  sensitive), with their rows and the earlier releases that determine them (a row of
  M^-1), to which the cell itself is added. Asking ``determined()`` after the last
  entry instead would miss a group determined mid-log and later cut by a finer query:
  its total stays known, but it is no longer an atom;
- every released cell of fewer than k units (released directly, even if no atom is).

- every union of two atoms of fewer than k units whose total became derivable while
  neither atom's is (e.g. SUM(male EE) + SUM(male CS) - SUM(male, class <= 1979) = two
  students); with one row per unit and k <= 3 that covers every group under k.

Not found: a small group that is a union of three or more atoms none of which is
derivable (possible when k > 3, or when a unit's rows lie in several atoms). Finding
every derivable small union is a minimum-weight codeword search.

The derivation named is one of possibly several (the one the auditor's basis gives),
and only releases that added information are named: a later repeat of a released
query set is implied, changes nothing and is never cited. Nothing here reads a value:
the report holds sizes, public dimension values, SQL texts and analysts only.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

import numpy as np
import numpy.typing as npt

from guard.arrays import distinct
from guard.audit.cellsets import EntryCells
from guard.audit.logsource import LogEntry
from guard.errors import QueryRejected
from guard.history.rowsets import RowIds, fingerprint
from guard.history.span import AtomView, SpanAuditor
from guard.query.shape import Scalar

__all__ = [
    "DESCRIBED_ROWS",
    "AuditResult",
    "CellRef",
    "CellSource",
    "Determined",
    "EntryOutcome",
    "OfflineAudit",
    "Status",
    "TimelinePoint",
    "audit_log",
]

Description = Mapping[str, Scalar | None]

#: determined groups of at least k units are described only up to this many rows (each
#: description is one backend query; disclosures are always described)
DESCRIBED_ROWS = 100


class CellSource(Protocol):
    """Where the replay gets query sets from (``cellsets.GuardCells`` over a backend)."""

    def cells(self, entry: LogEntry) -> EntryCells:
        """The query sets ``entry`` released; QueryRejected when the guard would reject it."""
        ...

    def unit_of_row(self, table: str) -> npt.NDArray[np.int64]:
        """The privacy unit of each row id 0 .. N-1 of ``table``."""
        ...

    def describe(self, table: str, rows: RowIds) -> Description | None:
        """The public dimension values all ``rows`` share, or None."""
        ...


class Status(Enum):
    REPLAYED = "replayed"
    #: the guard would reject the SQL: its cells are unknown and not audited
    NOT_REPLAYABLE = "not_replayable"


@dataclass(frozen=True)
class CellRef:
    """One released cell: the entry (``seq``) and the cell within its answer."""

    seq: int
    cell: str


@dataclass(frozen=True)
class Determined:
    """A group of rows whose total the released answers determine.

    ``number`` counts groups from 1 in order of discovery; ``seq`` is the entry whose
    answer made the total derivable; ``cells`` are the released cells one derivation
    combines (that entry's cell included), ``analysts`` who asked for them, sorted.
    ``description``: the public dimension values all its rows share (None for a large
    group). Never a value or a respondent's identity.
    """

    number: int
    table: str
    space: str
    rows: int
    units: int
    #: fewer than k privacy units: a disclosure under the policy's threshold
    disclosure: bool
    seq: int
    cells: tuple[CellRef, ...]
    analysts: tuple[str, ...]
    description: Description | None

    @property
    def entries(self) -> tuple[int, ...]:
        """The log entries (``seq``) whose answers one derivation combines."""
        return tuple(sorted({c.seq for c in self.cells}))

    @property
    def collusion(self) -> bool:
        """The derivation needs answers given to more than one analyst."""
        return len(self.analysts) > 1


@dataclass(frozen=True)
class EntryOutcome:
    """What replaying one entry did: ``cells`` released statistics audited, of which
    ``informative`` were not implied by earlier ones; ``determined`` the numbers of the
    groups it made derivable, ``disclosures`` those of them under k units."""

    entry: LogEntry
    status: Status
    reason: str | None = None
    table: str | None = None
    cells: int = 0
    informative: int = 0
    determined: tuple[int, ...] = ()
    disclosures: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TimelinePoint:
    """Cumulative counts after entry ``seq``: disclosures (< k units) and determined groups."""

    seq: int
    time: dt.datetime | None
    disclosures: int
    determined: int


@dataclass(frozen=True)
class AuditResult:
    k: int
    entries: tuple[EntryOutcome, ...]
    determined: tuple[Determined, ...]
    timeline: tuple[TimelinePoint, ...]

    @property
    def disclosures(self) -> tuple[Determined, ...]:
        """The determined groups of fewer than k privacy units."""
        return tuple(d for d in self.determined if d.disclosure)

    @property
    def not_replayable(self) -> tuple[EntryOutcome, ...]:
        return tuple(e for e in self.entries if e.status is Status.NOT_REPLAYABLE)

    def entry(self, seq: int) -> LogEntry:
        """The log entry numbered ``seq``. KeyError when there is none."""
        for outcome in self.entries:
            if outcome.entry.seq == seq:
                return outcome.entry
        raise KeyError(seq)


class OfflineAudit:
    """Replays log entries one at a time (in log order) against one set of auditors.

    ``k`` (>= 1) is the policy's threshold in privacy units. ``copies`` and
    ``random_bytes`` are passed to every :class:`SpanAuditor` (tests may seed them).
    """

    def __init__(
        self,
        source: CellSource,
        k: int,
        *,
        copies: int = 2,
        random_bytes: Callable[[int], bytes] = secrets.token_bytes,
    ) -> None:
        if k < 1:
            raise ValueError(f"k={k}: the threshold counts privacy units and must be >= 1")
        self.k = k
        self._source = source
        self._copies = copies
        self._random_bytes = random_bytes
        self._auditors: dict[tuple[str, str], SpanAuditor] = {}
        self._unit_rows: dict[str, bool] = {}
        self._analyst: dict[int, str] = {}
        self._seen: set[tuple[str, str, bytes]] = set()
        self._entries: list[EntryOutcome] = []
        self._determined: list[Determined] = []
        self._timeline: list[TimelinePoint] = []

    def replay(self, entry: LogEntry) -> EntryOutcome:
        """Audit ``entry``'s released cells together with everything replayed before.

        Raises:
            ValueError: an entry with this ``seq`` was replayed already.
            BackendError: the engine failed (a rejected SQL is an outcome, not an error).
        """
        if entry.seq in self._analyst:
            raise ValueError(f"entry seq={entry.seq} was replayed already: number entries uniquely")
        self._analyst[entry.seq] = entry.analyst
        try:
            cells = self._source.cells(entry)
        except QueryRejected as rejected:
            outcome = EntryOutcome(entry, Status.NOT_REPLAYABLE, reason=rejected.message)
        else:
            outcome = self._release(entry, cells)
        self._entries.append(outcome)
        small = sum(d.disclosure for d in self._determined)
        self._timeline.append(TimelinePoint(entry.seq, entry.time, small, len(self._determined)))
        return outcome

    def result(self) -> AuditResult:
        """Everything replayed so far."""
        return AuditResult(self.k, tuple(self._entries), tuple(self._determined), tuple(self._timeline))

    def _release(self, entry: LogEntry, cells: EntryCells) -> EntryOutcome:
        informative = 0
        found: list[int] = []
        units = self._source.unit_of_row(cells.table)
        one_row_each = self._one_row_each(cells.table, units)
        for cell in cells.cells:
            auditor = self._auditor(cells.table, cell.space)
            tag = CellRef(entry.seq, cell.label)
            found += self._new_atoms(auditor, cell.rows, cells.table, cell.space, tag)
            # a released cell is itself a determined group, but an atom only until some
            # other query cuts it: a small one is recorded whatever the atoms say
            cell_units = cell.rows.size if one_row_each else int(distinct(units[cell.rows]).size)
            if cell_units < self.k:
                found += self._record(cells.table, cell.space, cell.rows, cell_units, {tag}, tag.seq)
            informative += auditor.release(cell.rows, tag=tag)
        return EntryOutcome(
            entry,
            Status.REPLAYED,
            table=cells.table,
            cells=len(cells.cells),
            informative=informative,
            determined=tuple(found),
            disclosures=tuple(n for n in found if self._determined[n - 1].disclosure),
            notes=cells.notes,
        )

    def _new_atoms(
        self, auditor: SpanAuditor, rows: RowIds, table: str, space: str, tag: CellRef
    ) -> list[int]:
        """Record the atoms releasing ``rows`` would make derivable; their numbers."""
        views: dict[int, RowIds] = {}

        def every_atom(view: AtomView) -> bool:
            # k=0 below: every newly derivable atom reaches here, with its rows (in the
            # partition's order: sorted, so that equal groups get equal fingerprints)
            views[view.atom] = np.sort(np.asarray(view.rows, dtype=np.int64))
            return True

        unions: list[RowIds] = []

        def small_union(view: AtomView) -> bool:
            # a union of two atoms is a group worth naming only under k units (the
            # queries themselves are such unions); its rows come sorted
            if view.units < self.k:
                unions.append(view.rows)
                return True
            return False

        found = []
        disclosed = auditor.would_disclose(rows, k=0, sensitive=every_atom, unions=small_union)
        union_rows = iter(unions)
        for atom in disclosed:
            refs = {*(t for t in atom.queries if isinstance(t, CellRef)), tag}
            group = views[atom.atom] if atom.atom >= 0 else next(union_rows)
            found += self._record(table, space, group, atom.units, refs, tag.seq)
        return found

    def _record(
        self, table: str, space: str, rows: RowIds, units: int, refs: set[CellRef], seq: int
    ) -> list[int]:
        """Record a determined group unless known already; its number (or nothing)."""
        key = (table, space, fingerprint(rows))
        if key in self._seen:
            return []
        self._seen.add(key)
        small = units < self.k
        cells = tuple(sorted(refs, key=lambda c: (c.seq, c.cell)))
        self._determined.append(
            Determined(
                number=len(self._determined) + 1,
                table=table,
                space=space,
                rows=int(rows.size),
                units=units,
                disclosure=small,
                seq=seq,
                cells=cells,
                analysts=tuple(sorted({self._analyst[c.seq] for c in cells})),
                description=(
                    self._source.describe(table, rows) if small or rows.size <= DESCRIBED_ROWS else None
                ),
            )
        )
        return [len(self._determined)]

    def _one_row_each(self, table: str, units: npt.NDArray[np.int64]) -> bool:
        """Whether every privacy unit of ``table`` has one row (then rows count units)."""
        if table not in self._unit_rows:
            self._unit_rows[table] = int(distinct(units).size) == units.size
        return self._unit_rows[table]

    def _auditor(self, table: str, space: str) -> SpanAuditor:
        if (table, space) not in self._auditors:
            self._auditors[(table, space)] = SpanAuditor(
                self._source.unit_of_row(table), copies=self._copies, random_bytes=self._random_bytes
            )
        return self._auditors[(table, space)]


def audit_log(
    entries: Iterable[LogEntry],
    source: CellSource,
    k: int,
    *,
    on_entry: Callable[[EntryOutcome], None] | None = None,
    copies: int = 2,
    random_bytes: Callable[[int], bytes] = secrets.token_bytes,
) -> AuditResult:
    """Replay ``entries`` in order and return what their answers disclose.

    ``on_entry`` is called after each entry (progress bars). Raises as
    :meth:`OfflineAudit.replay`.
    """
    audit = OfflineAudit(source, k, copies=copies, random_bytes=random_bytes)
    for entry in entries:
        outcome = audit.replay(entry)
        if on_entry is not None:
            on_entry(outcome)
    return audit.result()
