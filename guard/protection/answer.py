"""Stage 6: protect the cells and assemble the answer.

:func:`guard.protection.decide.decide` says which cells to withhold (query-set-size
control, sensitivity rules, secondary suppression over the answer and the linked
earlier releases, LP audit); this module renders the rows, orders and limits them on
the protected values only, and writes the notes (counts and rules, never a value).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from guard.cells import CellGrid
from guard.errors import QueryRefused
from guard.history.controls import control_text
from guard.policy.model import Protection
from guard.protection.decide import REFUSED_LINKED, Decision, Withheld, WithheldKind, decide
from guard.protection.linking import Linking, standalone
from guard.query.shape import OutputKind, QueryShape
from guard.result import Flag, ProtectedResult
from guard.rules import query_set_size as qss

__all__ = ["ordered_rows", "protect", "protect_with_decision", "row_levels"]


def protect(
    shape: QueryShape, grid: CellGrid, protection: Protection, linking: Linking | None = None
) -> ProtectedResult:
    """The protected answer (see :func:`protect_with_decision`)."""
    return protect_with_decision(shape, grid, protection, linking)[0]


def protect_with_decision(
    shape: QueryShape,
    grid: CellGrid,
    protection: Protection,
    linking: Linking | None = None,
    *,
    explain: bool = False,
) -> tuple[ProtectedResult, Decision]:
    """Withhold what the controls say, order and limit the rows, and explain
    (``explain``: see :func:`~guard.protection.decide.decide`).

    ``shape`` may carry more aggregates than its outputs name (hidden sums of averages).

    Raises:
        QueryRefused: the query has a single cell row and every aggregate it outputs is
            withheld, or no suppression pattern protects the sensitive cells (with
            ``explain``, the answer is returned instead, every value of a refused space
            withheld, its last note the refusal).
    """
    decision = decide(shape, grid, protection, linking or standalone(shape), explain=explain)
    withheld = decision.withheld
    shown = sorted({o.index for o in shape.outputs if o.kind is OutputKind.AGGREGATE})
    refusal = decision.refusal  # explain only: decide raised it otherwise
    if not shape.group_by and grid.cells and shown and all((0, a) in withheld for a in shown):
        refusal = refusal or _refusal(grid, withheld[(0, shown[0])], protection)
    if refusal is not None and not explain:
        raise QueryRefused(refusal)

    released, suppressed = Flag.RELEASED.value, Flag.SUPPRESSED.value
    rows: list[list[Any]] = []
    flags: list[list[str]] = []
    for r, keys in enumerate(grid.keys):
        cells = grid.cells[r]
        values: list[Any] = []
        row_flags: list[str] = []
        for output in shape.outputs:
            if output.kind is OutputKind.KEY:
                values.append(keys[output.index])
                row_flags.append(released)
            elif output.kind is OutputKind.GROUPING:
                values.append(int(bool(grid.rolled_up and grid.rolled_up[r][output.index])))
                row_flags.append(released)
            elif (r, output.index) in withheld:
                values.append(None)
                row_flags.append(suppressed)
            else:
                values.append(cells[output.index].value)
                row_flags.append(released)
        rows.append(values)
        flags.append(row_flags)

    order = ordered_rows(shape, rows)
    rows = [rows[i] for i in order]
    flags = [flags[i] for i in order]
    result = ProtectedResult(
        columns=[o.name for o in shape.outputs],
        rows=rows,
        flags=flags,
        notes=[*_notes(shape, grid, decision, protection), *([f"asked, {refusal}"] if refusal else [])],
        levels=row_levels(shape, grid.rolled_up, order),
    )
    return result, dataclasses.replace(decision, order=tuple(order))


def row_levels(
    shape: QueryShape, rolled_up: Sequence[Sequence[bool]], order: Sequence[int]
) -> tuple[tuple[str, ...], ...] | None:
    """The grouping set of each row sent (``order``: grid rows in the answer's order), for
    the log (``ProtectedResult.levels``); None for a query of one grouping set, whose rows
    a log reader matches by their keys alone. ``rolled_up``: the grid's, per grid row."""
    if len(shape.levels) < 2 or (order and not rolled_up):
        return None  # one grouping set; or a grid that does not say (never a guess)
    by_mask: dict[tuple[bool, ...], tuple[str, ...]] = {}  # one tuple per set, shared by its rows
    levels = []
    for r in order:
        mask = tuple(rolled_up[r])
        if mask not in by_mask:
            by_mask[mask] = tuple(k for k, up in zip(shape.group_by, mask, strict=True) if not up)
        levels.append(by_mask[mask])
    return tuple(levels)


def _refusal(grid: CellGrid, reason: Withheld, protection: Protection) -> str:
    k, full = protection.min_query_set_size, protection.allow_full_population
    if reason.kind is WithheldKind.SECONDARY:
        return REFUSED_LINKED
    if reason.kind is WithheldKind.HISTORY:
        why = _history_reason(reason.rule, protection.history_k)
        return (
            f"refused, as when this was asked before, by the {why}. Ask about groups that differ "
            "from earlier questions, or group by fewer dimensions"
        )
    if reason.rule.startswith(qss.NAME):
        return qss.refusal_reason(grid.cells[0][0], k, full)
    return (
        f"refused by the sensitivity rule {reason.rule}: the cell is dominated by too few "
        "respondents or has too few of them; widen the WHERE conditions"
    )


def ordered_rows(shape: QueryShape, rows: list[list[Any]]) -> list[int]:
    """Row order computed on the protected values only: ordering by the hidden values
    would leak how withheld cells compare. Rows arrive in group-key order (sorted
    by the engine); ORDER BY re-sorts them stably."""
    order = list(range(len(rows)))  # the backend returns rows in group-key order
    for item in reversed(shape.order_by):
        nulls = [i for i in order if rows[i][item.output] is None]
        present = [i for i in order if rows[i][item.output] is not None]
        present.sort(key=lambda i: _sort_key(rows[i][item.output]), reverse=item.descending)
        order = nulls + present if item.nulls_first else present + nulls
    start = shape.offset
    stop = None if shape.limit is None else start + shape.limit
    return order[start:stop]


def _sort_key(value: Any) -> tuple[str, Any]:
    # values of one column share a type; the type name only separates oddities
    return ("", value) if isinstance(value, int | float) else (type(value).__name__, value)


def _notes(shape: QueryShape, grid: CellGrid, decision: Decision, protection: Protection) -> list[str]:
    shown = {o.index for o in shape.outputs if o.kind is OutputKind.AGGREGATE}
    withheld = {cell: why for cell, why in decision.withheld.items() if cell[1] in shown}
    if not withheld:
        return []
    total = len(grid.cells) * len(shown)
    k = protection.min_query_set_size
    size_rule = f"{qss.NAME}(k={k})"
    by_rule: dict[str, int] = {}
    by_history: dict[str, int] = {}  # per control recorded ("": none)
    secondary = 0
    for why in withheld.values():
        if why.kind is WithheldKind.SECONDARY:
            secondary += 1
        elif why.kind is WithheldKind.HISTORY:
            by_history[why.rule] = by_history.get(why.rule, 0) + 1
        else:
            by_rule[why.rule] = by_rule.get(why.rule, 0) + 1
    notes = []
    if size_rule in by_rule:
        notes.append(
            f"{by_rule.pop(size_rule)} of {total} cells suppressed by the query-set-size control "
            f"(each released cell needs at least k={k} respondents and at least {k} outside it)"
        )
    if by_rule:
        listed = ", ".join(f"{rule}: {count}" for rule, count in sorted(by_rule.items()))
        notes.append(f"{sum(by_rule.values())} of {total} cells suppressed as sensitive ({listed})")
    if secondary:
        methods = sorted(
            {_METHOD_WORDS.get(r.method, r.method) for r in decision.reports if r.suppressed & r.current}
        )
        notes.append(
            f"{secondary} of {total} cells suppressed as secondary (complementary) cells, so that no "
            f"sensitive cell can be recomputed from the released cells and totals "
            f"(method: {', '.join(methods)})"
        )
    if by_history:
        reasons = "; ".join(_history_reason(c, protection.history_k) for c in sorted(by_history))
        notes.append(
            f"{sum(by_history.values())} of {total} cells withheld, as when they were asked before, "
            f"by the {reasons}"
        )
    # only this answer's cells: counting never-released cells would say something about them
    audited = sum(len(r.requirements.keys() & r.current) for r in decision.reports if r.table is not None)
    if audited:
        notes.append(
            f"LP audit: each of the {audited} sensitive cells in linked tables keeps a feasibility "
            "interval at least as wide as its protection level"
        )
    return notes


def _history_reason(control: str, k: int) -> str:
    """The words of the history audit's control that withheld a cell before ("": none was
    recorded with it, before session 20: the store kept that the audit withheld it only)."""
    if control:
        return control_text(control, k)
    return (
        "exact history audit, for the control that answer's note named (with the answers already "
        "given, a release that would reveal the total of a small group or of a protected cell, or "
        "that the audit could not show safe within its budget)"
    )


#: how a pattern was chosen, in the note (SpaceReport.method)
_METHOD_WORDS = {
    "optimal": "optimal",
    "heuristic": "heuristic",
    "replayed": "as released before",
    "withheld": (
        "new cells withheld: the problem linked to earlier releases is too large to solve online "
        "(new cells that published ones already fix are released)"
    ),
    "implied": "only new cells that published ones already fix",
    "refused": "none protects every sensitive cell: every cell that can be withheld is",
    "none": "none",
}
