"""The online history audit: no answer may complete a disclosure with earlier answers.

Before an answer leaves, each of its published cells is checked, in order, against
everything released before in its *audit state*: one per (table, space, scope), across
data versions (``lineage.py``: answers on an earlier version stay equations over the
rows' identities; ``universe.py``). The space is ``count`` or ``sum(m)``
(``keys.space_of``: AVG is audited as the SUM on its query set). The scope is ``all``
by default, so the answers of every analyst feed one state (A's SUM(EE) and B's
SUM(EE and male) disclose together); the policy may declare administratively isolated
groups, each with its own state.

A cell's query set is its set of finest cells (``finest.py``). The checks, cheapest first:

1. implied: the cell's value follows from earlier releases: released, nothing changes;
2. overlap control (``max_overlap``, off by default): the query set may share at most
   that many privacy units with any earlier released one (a repeat is exempt);
3. exact group audit (``groups.py`` over ``span.py``'s basis): releasing the cell must
   not put in the span of released SUMs any vector (a total, a difference, any
   combination) whose rows touch fewer than k privacy units, however many atoms and rows
   per unit it takes, nor any supported inside a finest cell the sensitivity rules flag
   (``sensitive.py``); a search over its budget withholds the cell;
4. partial disclosure (``tolerance``, off by default): an LP over the declared bounds
   must not pin such a group's total to an interval narrower than ``tolerance`` x its
   a-priori range (``intervals.py``).

A cell failing a check is withheld: :meth:`HistoryScreen.screen` returns which cells
and a note naming the control, and the guard builds the answer with them withheld
(NULL, flagged ``suppressed``; asked again in the same state, withheld unsearched); an
answer all of whose values are withheld is refused with that control's message.
Messages never hold a value or another analyst's query. Checks 1-3 read query sets
only, so their decisions are simulatable (the same on any two databases that agree on
what was released); check 4 reads released values and the candidate's true value, so
its refusals are not, which is why it is off by default.

Each released query set is persisted (``audit_sets``) in the transaction of the answer's
log row, and an audit state is rebuilt from them when first needed after a restart.
Withholding only ever releases less than the cell protection allowed: linked tables
and earlier suppression patterns stay safe.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from guard.backends.base import Backend, TableInfo
from guard.cells import CellGrid
from guard.errors import QueryRefused
from guard.history.controls import HistoryControl, note, ordered, refusal
from guard.history.finest import FinestCells, Ids, SpaceCells
from guard.history.groups import GroupSearch, GroupVerdict
from guard.history.intervals import IntervalAudit
from guard.history.keys import COUNT_SPACE, CellKey, cell_key, cell_label, space_of
from guard.history.overlap import overlaps_any
from guard.history.rowsets import as_bitmap, fingerprint
from guard.history.sensitive import FinestSensitivity, protects_sensitive_sets, sensitive_sets
from guard.history.span import SpanAuditor
from guard.history.stated import measure_bounds, released_sum
from guard.history.states import MAX_IN_SPAN, AuditState, Screened
from guard.history.universe import AuditCells, HistoryStore, Universe, universe
from guard.policy.model import HistoryMode, NoiseMode, Policy, Role, Table
from guard.query.shape import AggFunc, OutputKind, QueryShape
from guard.result import Flag, ProtectedResult
from guard.state.records import AuditedSet, HistoryWrite

__all__ = ["FinestSensitivity", "HistoryControl", "HistoryScreen", "Screened"]

_WITHHELD = Flag.SUPPRESSED.value


class HistoryScreen:
    """The history audit of one guard. ``screen`` must be called under the guard's
    release lock (decide-then-release is one step per audit state)."""

    def __init__(
        self,
        policy: Policy,
        backend: Backend,
        store: HistoryStore,
        sensitivity: Callable[[Table, TableInfo], FinestSensitivity | None] | None = None,
    ) -> None:
        """``store`` holds the released query sets and each version's row identities;
        ``sensitivity`` says which finest cells of a table the policy's rules flag."""
        self.policy = policy
        self._backend = backend
        self._store = store
        self._sensitivity = sensitivity
        self._flagged: dict[tuple[str, str], FinestSensitivity | None] = {}
        self._settings = policy.protection.history
        self.k = policy.protection.history_k
        self._finest: dict[tuple[str, str], FinestCells] = {}
        self._finest_lock = threading.Lock()
        self._states: dict[tuple[tuple[str, ...], str, str, str], AuditState] = {}
        self._universes: dict[tuple[str, str], Universe] = {}
        # one worker: a version's identities are stored off the answer's path
        self._background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="history-lineage")

    @property
    def enabled(self) -> bool:
        return self._settings.audit is HistoryMode.EXACT

    def prepare(self, lock: threading.Lock) -> list[str]:
        """Build, for every table answered without noise to someone, what its first answer
        would otherwise wait for: its finest cells, their rows' identities on the current
        data version, which finest cells the rules flag, and the audit state of each space
        (COUNT, each measure's SUM) in each scope that analysts answered without noise feed
        (rebuilt from what was released before), each table under ``lock``, the guard's
        release lock. Returns the tables prepared."""
        prepared = []
        for table in self.policy.tables:
            exact = [
                a for a in self.policy.analysts if self.policy.noise_mode(table, a) is not NoiseMode.NOISE
            ]
            if not exact:
                continue  # answered with noise to everyone: no history audit
            info = self._backend.table_info(table.name)
            spaces = [COUNT_SPACE, *(space_of(AggFunc.SUM, m)[0] for m in table.names(Role.MEASURE))]
            with lock:
                rows = self._universe(self._cells(table, info))
                rows.ready()
                self._flags(table, info)
                for scope in sorted({self._settings.scope_of(a.name) for a in exact}):
                    for space in spaces:
                        self._state(rows, table, info, space, scope)
            prepared.append(table.name)
        return prepared

    def query_sets(self, shape: QueryShape, table: Table, info: TableInfo) -> list[SpaceCells]:
        """The finest-cell query sets of every cell ``shape`` may answer (no lock needed)."""
        spaces: dict[tuple[str, str | None], set[int]] = {}
        for i, aggregate in enumerate(shape.aggregates):
            spaces.setdefault(space_of(aggregate.func, aggregate.column), set()).add(i)
        listed = [(space, column, frozenset(idx)) for (space, column), idx in spaces.items()]
        return self._cells(table, info).query_sets(shape, listed)

    def released(
        self, analyst: str, table: Table, info: TableInfo, space: str
    ) -> tuple[Universe, list[tuple[str, bytes, float | None]]]:
        """The audit's rows of ``table`` (every data version) and what ``analyst``'s audit
        scope released into ``space``, in order, as the store keeps it (``heldintervals.py``)."""
        rows = self._universe(self._cells(table, info))
        return rows, self._store.audit_sets(table.name, space, self._settings.scope_of(analyst))

    def known_rows(
        self,
        analyst: str,
        shape: QueryShape,
        table: Table,
        info: TableInfo,
        sets: Sequence[SpaceCells],
        grid: CellGrid,
        candidates: Collection[int],
    ) -> dict[int, frozenset[int]]:
        """Per aggregate of ``shape``: the ``candidates`` rows of ``grid`` whose query set
        is in the span of what ``analyst``'s audit scope released (their values are
        already determined)."""
        rows = self._universe(self._cells(table, info))
        keys = {r: cell_key(shape, grid, r) for r in candidates}
        found: dict[int, frozenset[int]] = {}
        for space_cells in sets:
            state = self._state(rows, table, info, space_cells.space, self._settings.scope_of(analyst))
            known = set()
            for r, key in keys.items():
                cells = space_cells.cells.get(key)
                ids = None if cells is None else rows.ids(info.data_version, cells)
                if ids is not None and ids.size and state.auditor.implied(ids):
                    known.add(r)
            found.update(dict.fromkeys(space_cells.aggregates, frozenset(known)))
        return found

    def screen(
        self,
        analyst: str,
        shape: QueryShape,
        table: Table,
        info: TableInfo,
        result: ProtectedResult,
        sets: Sequence[SpaceCells],
        grid: CellGrid,
        order: Sequence[int],
        measured: QueryShape | None = None,
        refuse: bool = True,
        release: bool = True,
    ) -> Screened:
        """Check every published value of ``result``, name those that would disclose, and
        release the rest into their audit states (``result`` is not changed). ``order[i]`` is the
        row of ``grid`` (the answer before protection) behind row i of ``result``;
        ``measured`` is the shape of ``grid``'s cells (with the sums averages imply).

        Not ``release``: check only, remember nothing (``preview.py``: exact when each
        state has at most one value to check, no check then following a release).

        Raises:
            QueryRefused: every value the answer would publish is withheld (unless not
                ``refuse``: ``guard explain`` shows them).
        """
        rows = self._universe(self._cells(table, info))
        scope = self._settings.scope_of(analyst)
        matched = [cell_key(shape, grid, r) for r in order]
        by_aggregate = {a: s for s in sets for a in s.aggregates}
        written: list[AuditedSet] = []
        published = 0
        withheld: dict[tuple[int, int], HistoryControl] = {}  # position: its control
        begun: set[int] = set()
        stamped: list[tuple[AuditState, tuple[Hashable, CellKey], Ids]] = []  # held in this answer
        for r, key in enumerate(matched):
            for position, output in enumerate(shape.outputs):
                if output.kind is not OutputKind.AGGREGATE:
                    continue
                value = result.rows[r][position]
                if value is None or result.flags[r][position] == _WITHHELD:
                    continue
                space_cells = by_aggregate[output.index]
                state = self._state(rows, table, info, space_cells.space, scope)
                remembered = (space_cells.selection, key)
                if remembered in state.in_span:  # implied: the span only grows
                    published += 1
                    continue
                held = state.held.get(remembered)
                if held is not None and held[1] == state.auditor.version:  # nothing changed
                    withheld[(r, position)] = held[0]
                    continue
                cells = space_cells.cells.get(key)
                ids = None if cells is None else rows.ids(info.data_version, cells)
                if cells is None or ids is None or ids.size == 0:
                    # a published cell whose rows the audit cannot name is not released
                    # unaudited: withhold it
                    withheld[(r, position)] = HistoryControl.UNMATCHED
                    continue
                if id(state) not in begun:
                    state.groups.begin_answer()  # one search budget for the answer's cells
                    begun.add(id(state))
                # the LP constrains sums: an average states its query set's sum too
                # (with the count, which is no secret), so it enters as that sum
                total = released_sum(shape, measured, grid.cells[order[r]], output.index, value)
                control = self._check(state, rows.cells, ids, total, table, space_cells.space)
                if control is not None:
                    withheld[(r, position)] = control
                    if release and space_cells.selection is not None and len(state.held) < MAX_IN_SPAN:
                        state.held[remembered] = (control, state.auditor.version)
                        stamped.append((state, remembered, ids))
                    continue
                published += 1
                if not release:
                    continue
                if space_cells.selection is not None and len(state.in_span) < MAX_IN_SPAN:
                    state.in_span.add(remembered)
                if state.auditor.release(ids, tag=(analyst, cell_label(key), output.name)):
                    state.groups.tidy(state.auditor)
                    self._remember(state, ids, total)
                    bitmap = as_bitmap(cells)  # stored as this version's finest cells
                    written.append(
                        AuditedSet(space_cells.space, scope, cell_label(key), bitmap.serialize(), total)
                    )
        for state, remembered, ids in stamped:
            # the answer's later releases moved the version: a repeat would re-read each
            # (q19's: 324 implied checks, most of its time); what is still not implied is
            # withheld again for the same control (``_check``'s memo), so stamp it now
            held = state.held[remembered]
            if held[1] != state.auditor.version and not state.auditor.implied(ids):
                state.held[remembered] = (held[0], state.auditor.version)
        controls = set(withheld.values())
        if withheld and not published and refuse:
            raise QueryRefused(refusal(ordered(controls), self.k))
        notes = (note(len(withheld), ordered(controls), self.k),) if withheld else ()
        if written:
            rows.ready()  # a version's releases are logged only once its identities are stored
        write = HistoryWrite(info.data_version, table.name, tuple(written)) if written else None
        return Screened(write, {p: c.value for p, c in withheld.items()}, notes)

    def shadow(self) -> HistoryScreen:
        """A screen whose audit states are rebuilt from the store when first needed, so
        that screening with it releases nothing here (``preview.py``). It shares this
        screen's finest cells, row identities, rules' verdicts and worker (read, or
        added to as this screen would): drop it after use, never ``close`` it."""
        other = HistoryScreen(self.policy, self._backend, self._store, self._sensitivity)
        other._background.shutdown()  # no thread was started: this screen's worker instead
        other._background, other._finest_lock = self._background, self._finest_lock
        other._finest, other._universes, other._flagged = self._finest, self._universes, self._flagged
        return other

    def close(self) -> None:
        self._background.shutdown(wait=True)
        for cells in self._finest.values():
            cells.close()

    # -- checks ------------------------------------------------------------------------

    def _check(
        self, state: AuditState, finest: AuditCells, ids: Ids, total: float | None, table: Table, space: str
    ) -> HistoryControl | None:
        """The control that withholds this query set, or None to release it."""
        if state.auditor.implied(ids):
            return None
        key = fingerprint(ids)  # withheld before in this state (one data version): again
        if key not in state.withheld and (held := self._control(state, finest, ids, total, table, space)):
            state.withheld[key] = held
        return state.withheld.get(key)

    def _control(
        self, state: AuditState, finest: AuditCells, ids: Ids, total: float | None, table: Table, space: str
    ) -> HistoryControl | None:
        limit = self._settings.max_overlap
        if limit is not None and overlaps_any(ids, state.released, state.seen, finest.units, limit):
            return HistoryControl.OVERLAP
        exposure = state.auditor.exposure(ids)
        if exposure is not None:
            finding = state.groups.check(exposure)
            if finding.verdict is GroupVerdict.DISCLOSES:
                return HistoryControl.SENSITIVE if finding.sensitive else HistoryControl.SPAN
            if finding.verdict is GroupVerdict.EXHAUSTED:
                return HistoryControl.EXHAUSTED
        if state.sensitive is not None and total is not None:
            bounds = measure_bounds(table, space)
            if bounds is not None and not protects_sensitive_sets(
                state.sensitive, finest, state.released, state.values, ids, total, bounds, state.carry
            ):
                return HistoryControl.SENSITIVE
        if self._settings.tolerance is not None:
            bounds = measure_bounds(table, space)
            if bounds is not None:
                lp = IntervalAudit(finest, bounds, self._settings.tolerance, self.k)
                if lp.too_narrow(state.released, state.values, ids, total):
                    return HistoryControl.INTERVAL
        return None

    # -- states --------------------------------------------------------------------------

    def _remember(self, state: AuditState, ids: Ids, total: float | None) -> None:
        lp = self._settings.tolerance is not None or state.sensitive is not None
        if self._settings.max_overlap is not None or lp:
            state.released.append(as_bitmap(ids))
            state.values.append(total)
            state.seen.add(fingerprint(ids))

    def _cells(self, table: Table, info: TableInfo) -> FinestCells:
        key = (info.data_version, table.name)
        with self._finest_lock:
            if key not in self._finest:
                self._finest[key] = FinestCells(self._backend, table, info)
            return self._finest[key]

    def _flags(self, table: Table, info: TableInfo) -> FinestSensitivity | None:
        key = (table.name, info.data_version)
        if key not in self._flagged:
            self._flagged[key] = None if self._sensitivity is None else self._sensitivity(table, info)
        return self._flagged[key]

    def _universe(self, finest: FinestCells) -> Universe:
        key = (finest.table, finest.data_version)
        if key not in self._universes:
            self._universes[key] = universe(finest, self._backend, self._store, self._background)
        return self._universes[key]

    def _state(self, rows: Universe, table: Table, info: TableInfo, space: str, scope: str) -> AuditState:
        key = (rows.key, table.name, space, scope)
        if key not in self._states:
            auditor = SpanAuditor(np.arange(rows.cells.count, dtype=np.int64), boxes=rows.boxes)
            flagged = sensitive_sets(self._flags(table, info), self._cells(table, info), rows, space)
            groups = GroupSearch(self.k, rows.cells, None if flagged is None else flagged.of)
            state = AuditState(auditor, groups, sensitive=flagged)
            # a restart or a new data version rebuilds the state from everything released
            # before, on every version whose identities are known, in order
            for version, cells, value in self._store.audit_sets(table.name, space, scope):
                ids = rows.stored(version, cells)
                if ids is None:
                    continue  # released before versions were tracked: see the module docstring
                if state.auditor.release(ids):
                    state.groups.tidy(state.auditor)
                self._remember(state, ids, value)
            self._states[key] = state
        return self._states[key]
