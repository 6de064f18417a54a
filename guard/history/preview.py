"""What the history audit would withhold of an answer, releasing nothing (``guard explain``).

The screen releases each cell it clears before it checks the next (a later cell is
checked with the earlier ones released, as the analyst would receive them), and a
release is never taken back. An answer with at most one value to check per audit state
(a refused one-cell question, the usual one to explain) is checked on the live states
without releasing anything (``screen(release=False)``: no check follows a release, so
the verdict is the query's). Otherwise a preview runs the same screen on audit states
rebuilt from the store, as after a restart (``HistoryScreen.shadow``: everything
released before, in order), and then drops them: the live states, the store and the log
do not change. The verdicts are the screen's: its checks read query sets only, and a rebuilt
state holds the same releases in the same order (its secret prime and row weights are
drawn afresh, which changes a verdict only with negligible probability), except that a
value the live state withheld over its search budget is withheld again there unsearched,
where a rebuilt state searches it anew, as after a restart (``_State.withheld``). Rebuilding
costs about what those releases cost when they were made, so explaining an answer on a
long history takes seconds: ``guard explain`` is a steward's tool, not the query path.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from guard.backends.base import TableInfo
from guard.cells import CellGrid
from guard.history.controls import HistoryControl, control_text
from guard.history.finest import SpaceCells
from guard.history.heldintervals import HeldSet, SpaceProblem, explained_intervals, problem
from guard.history.keys import cell_key, cell_label
from guard.history.screen import HistoryScreen
from guard.history.stated import measure_bounds
from guard.history.universe import Universe
from guard.policy.model import Table
from guard.query.shape import OutputKind, QueryShape
from guard.result import Flag, ProtectedResult
from guard.state.records import HistoryWrite

__all__ = ["HeldValue", "Preview", "preview"]

_WITHHELD = Flag.SUPPRESSED.value


@dataclass(frozen=True)
class HeldValue:
    """One value the history audit would withhold: its cell (``region='CA'``), the audit
    space it feeds (``count``, ``sum(income)``: an average is audited as its sum), its
    output column, the control that withholds it and that control's words."""

    cell: str
    space: str
    column: str
    control: HistoryControl
    reason: str
    #: what the released answers (earlier ones and this one's) leave of it
    #: (``heldintervals.py``); NaN where not computed
    low: float = math.nan
    high: float = math.nan


@dataclass(frozen=True)
class Preview:
    """``result`` with what the history audit would withhold withheld (and its notes),
    and those values (:meth:`held`)."""

    result: ProtectedResult
    #: the values, without their intervals yet
    values: tuple[HeldValue, ...] = ()
    #: their query sets, and the LP of each audit state they feed
    sets: tuple[HeldSet | None, ...] = ()
    problems: Mapping[str, SpaceProblem] = field(default_factory=dict)

    def held(self) -> tuple[HeldValue, ...]:
        """The values the history audit would withhold, each with what the released
        answers leave of it: LPs (up to ``MAX_INTERVAL_SECONDS``), so call it after the
        release lock is let go."""
        intervals = explained_intervals(self.problems, self.sets)
        pairs = zip(self.values, intervals, strict=True)
        return tuple(replace(value, low=low, high=high) for value, (low, high) in pairs)


def preview(
    screen: HistoryScreen | None,
    analyst: str,
    shape: QueryShape,
    info: TableInfo,
    result: ProtectedResult,
    grid: CellGrid,
    order: Sequence[int],
    measured: QueryShape,
) -> Preview:
    """What ``screen`` (None: the audit is off) would withhold of ``result``, the answer
    to ``shape`` after cell protection (arguments as ``HistoryScreen.screen``), with
    every value checked even when all would be withheld (the query would be refused).
    Call it under the guard's release lock, as the screen."""
    table = None if screen is None else screen.policy.table(shape.table)
    if screen is None or table is None:
        return Preview(result)  # the audit is off (a table answered is declared)
    sets = screen.query_sets(shape, table, info)
    space_of = {a: s.space for s in sets for a in s.aggregates}
    checked = Counter(
        space_of[output.index]
        for row, flags in zip(result.rows, result.flags, strict=True)
        for position, output in enumerate(shape.outputs)
        if output.kind is OutputKind.AGGREGATE and row[position] is not None and flags[position] != _WITHHELD
    )
    alone = all(count <= 1 for count in checked.values())
    screener = screen if alone else screen.shadow()
    screened = screener.screen(
        analyst, shape, table, info, result, sets, grid, order, measured, refuse=False, release=not alone
    )
    positions = sorted(screened.controls)
    held = tuple(
        HeldValue(
            cell_label(cell_key(shape, grid, order[r])),
            space_of[shape.outputs[position].index],
            result.columns[position],
            HistoryControl(screened.controls[(r, position)]),
            control_text(screened.controls[(r, position)], screen.k),
        )
        for r, position in positions
    )
    write = screened.write
    targets, problems = _problems(screen, analyst, shape, table, info, sets, grid, order, positions, write)
    return Preview(result.withholding(screened.withheld, screened.notes), held, targets, problems)


def _problems(
    screen: HistoryScreen,
    analyst: str,
    shape: QueryShape,
    table: Table,
    info: TableInfo,
    sets: Sequence[SpaceCells],
    grid: CellGrid,
    order: Sequence[int],
    positions: Sequence[tuple[int, int]],
    write: HistoryWrite | None,
) -> tuple[tuple[HeldSet | None, ...], dict[str, SpaceProblem]]:
    """Each withheld value's query set, and the LP of each audit state (``heldintervals.py``):
    everything released before into it and what this answer releases (read under the
    release lock, as the screen)."""
    by_aggregate = {a: s for s in sets for a in s.aggregates}
    problems: dict[str, SpaceProblem] = {}
    universes: dict[str, Universe] = {}
    held: list[HeldSet | None] = []
    for r, position in positions:
        space_cells = by_aggregate[shape.outputs[position].index]
        space = space_cells.space
        if space not in problems:
            universes[space], stored = screen.released(analyst, table, info, space)
            written = write.sets if write else ()
            mine = [(info.data_version, s.cells, s.value) for s in written if s.space == space]
            problems[space] = problem(universes[space], space, [*stored, *mine], measure_bounds(table, space))
        cells = space_cells.cells.get(cell_key(shape, grid, order[r]))
        ids = None if cells is None else universes[space].ids(info.data_version, cells)
        held.append(None if ids is None or ids.size == 0 else HeldSet(space, ids))
    return tuple(held), problems
