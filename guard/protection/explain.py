"""``guard explain``: each withheld cell's feasibility interval against its protection
level, for data stewards and auditors (never for analysts: the levels are computed
from confidential contributions)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from guard.errors import QueryRejected
from guard.history.preview import HeldValue
from guard.plan.sql import where
from guard.protection.decide import Decision, SpaceReport
from guard.protection.keys import readable
from guard.protection.linking import Linking
from guard.query.shape import QueryShape
from guard.result import ProtectedResult
from guard.rules import RuleVerdict
from guard.suppression import Key, audit, failures

__all__ = ["MAX_ATTRIBUTION_SECONDS", "ExplainedCell", "Explanation", "explain_decision", "noised_rejection"]

#: seconds one explanation may spend finding which sensitive cells each secondary cell
#: protects (one LP audit of the sensitive cells per secondary cell)
MAX_ATTRIBUTION_SECONDS = 10.0
#: sensitive cells named per secondary cell (the others counted)
_NAMED = 3
#: methods of a space whose pattern was not solved (``decide``: a few new cells over a
#: linked problem too large to solve online, withheld unless published cells fix them)
_NOT_SOLVED = frozenset({"withheld", "implied"})


@dataclass(frozen=True)
class ExplainedCell:
    """One withheld (or sensitive) cell of the protection problem.

    ``status``: "primary: <rules>", "secondary for <the sensitive cells it protects:
    those whose interval would miss their levels against an outsider if it alone were
    published>" (or why none is named), "history audit" (withheld by the exact
    history audit when it was answered before), the words of a history control (a value
    of this answer the history audit would withhold: the control says what releasing it
    would reveal, and its interval is what the released answers leave of it,
    ``guard.history.heldintervals``), or for cells outside this answer
    "withheld earlier" / "never released". ``width`` is the feasibility interval's
    width (``inf`` when unbounded); ``required`` the protection interval's width
    (lower + upper level; None for a cell that needs none); ``meets`` whether the
    interval reaches both levels.
    """

    cell: str
    quantity: str
    status: str
    low: float
    high: float
    width: float
    required: float | None
    meets: bool | None


@dataclass(frozen=True)
class Explanation:
    result: ProtectedResult
    cells: tuple[ExplainedCell, ...]
    #: per quantity: how the complementary cells were chosen ("none": no relations)
    methods: dict[str, str]


def explain_decision(
    result: ProtectedResult,
    decision: Decision,
    linking: Linking,
    audit_limit: int,
    shape: QueryShape,
    held: Sequence[HeldValue] = (),
) -> Explanation:
    """Intervals by LP for problems up to ``audit_limit`` cells; larger ones are shown
    as proven by the certificates :func:`guard.suppression.suppress` checked. When the
    keys do not state the answer's row filter (a range, a disjunction: its cells live
    in a key space of their own), each cell's key is followed by the filter. ``held``:
    the values the history audit would withhold (``guard.history.preview``), after
    the cell protection's."""
    dimensions = linking.dimensions
    condition = where(shape.predicates) if linking.fixed is None else None
    where_text = condition.sql(dialect="duckdb") if condition is not None else None
    cells: list[ExplainedCell] = []
    methods = {}
    deadline = time.monotonic() + MAX_ATTRIBUTION_SECONDS
    for report in decision.reports:
        methods[report.space] = report.method + (
            " (proven optimal)" if report.optimal and report.table else ""
        )
        found = _space_cells(report, dimensions, audit_limit, deadline)
        if where_text:
            found = [replace(c, cell=f"{c.cell} (where {where_text})") for c in found]
        cells.extend(found)
    suffix = f" (where {where_text})" if where_text else ""
    for value in held:
        status = f"{value.reason} (column {value.column})"
        width = value.high - value.low  # NaN when not computed
        if width != width:
            status += " (interval not computed)"
        cell = f"{value.cell}{suffix}"
        cells.append(ExplainedCell(cell, value.space, status, value.low, value.high, width, None, None))
    return Explanation(result, tuple(cells), methods)


def noised_rejection(table: str, analyst: str) -> QueryRejected:
    """Why a table answered with noise has nothing to explain."""
    return QueryRejected(
        f"explain shows cell suppression, and {table} is answered to {analyst} with noise: nothing "
        "is suppressed; the answer's notes give each column's noise scale"
    )


def _space_cells(
    report: SpaceReport, dimensions: Sequence[str], audit_limit: int, deadline: float
) -> list[ExplainedCell]:
    sensitive = {k: v for k, v in report.requirements.items() if v.sensitive}
    # this answer's withheld cells, and every sensitive cell they are linked with
    shown = sorted((report.suppressed & report.current) | set(sensitive), key=repr)
    if report.method == "replayed":
        # decided by the earlier release of the same cells (explain that one instead)
        return _unaudited(report, shown, dimensions, " (as released before)", math.nan, math.nan, None)
    if report.table is None and report.method in _NOT_SOLVED:
        # a few new cells over a linked problem too large to solve online: withheld
        # unless published cells fix them, no pattern solved, so no interval to show
        remark = " (not solved: the problem linked to earlier releases is too large to solve online)"
        return _unaudited(report, shown, dimensions, remark, math.nan, math.nan, None)
    if report.table is None:
        # no relation publishes anything about these cells: only the a-priori bounds
        return _unaudited(report, shown, dimensions, "", -math.inf, math.inf, True)
    if len(report.table) > audit_limit:
        # two LPs per cell over the whole component: minutes on a 10 000-cell table
        return _unaudited(report, shown, dimensions, " (proven by certificate)", math.nan, math.nan, None)
    intervals = audit(report.table, report.suppressed, cells=shown)
    failing = {f.key for f in failures(report.table, report.suppressed, sensitive)}
    protected = _protected(report, shown, sensitive, failing, dimensions, deadline)
    out = []
    for key in shown:
        low, high = intervals[key]
        required = _required(report, key)
        out.append(
            ExplainedCell(
                readable(key, dimensions),
                report.space,
                _status(report, key) + protected.get(key, ""),
                low,
                high,
                high - low,
                required,
                None if required is None else key not in failing,
            )
        )
    return out


def _protected(
    report: SpaceReport,
    shown: Sequence[Key],
    sensitive: Mapping[Key, RuleVerdict],
    failing: set[Key],
    dimensions: Sequence[str],
    deadline: float,
) -> dict[Key, str]:
    """Per secondary cell, which requirement withheld it: the sensitive cells whose
    interval would miss their protection levels against an outsider if it alone were
    published (an LP audit of the pattern without it), named after its status."""
    assert report.table is not None
    out = {}
    for key in shown:
        if _status(report, key) != "secondary":
            continue
        if time.monotonic() >= deadline:
            out[key] = " (which sensitive cells it protects: not computed, over the time budget)"
            continue
        try:
            exposed = [f.key for f in failures(report.table, report.suppressed - {key}, sensitive)]
        except ValueError:  # an LP HiGHS could not solve: say so rather than fail the explanation
            out[key] = " (which sensitive cells it protects: not computed, an LP failed)"
            continue
        new = [k for k in exposed if k not in failing]
        names = sorted(f"{readable(k, dimensions)} ({sensitive[k].rule})" for k in new)
        if not names:
            # a sole contributor knows her own cell: a pattern may need it against her only
            out[key] = " (published alone, it would leave every sensitive cell protected against an outsider)"
            continue
        more = f"; and {len(names) - _NAMED} more" if len(names) > _NAMED else ""
        out[key] = f" for {'; '.join(names[:_NAMED])}{more}"
    return out


def _unaudited(
    report: SpaceReport,
    keys: Sequence[Key],
    dimensions: Sequence[str],
    remark: str,
    low: float,
    high: float,
    meets: bool | None,
) -> list[ExplainedCell]:
    """Cells whose interval is not computed here, with why."""
    return [
        ExplainedCell(
            readable(k, dimensions),
            report.space,
            _status(report, k) + remark,
            low,
            high,
            high - low,
            _required(report, k),
            meets if _required(report, k) is not None else None,
        )
        for k in keys
    ]


def _status(report: SpaceReport, key: object) -> str:
    verdict = report.requirements.get(key)  # type: ignore[call-overload]
    if key not in report.current:
        origin = "withheld earlier" if key in report.earlier else "never released"
        return origin if verdict is None or not verdict.sensitive else f"{origin}; sensitive: {verdict.rule}"
    if verdict is not None and verdict.sensitive:
        return f"primary: {verdict.rule}"
    if key in report.audited:
        return "history audit"
    return "secondary"


def _required(report: SpaceReport, key: object) -> float | None:
    verdict = report.requirements.get(key)  # type: ignore[call-overload]
    if verdict is None or not verdict.sensitive:
        return None
    return float(verdict.lower + verdict.upper)
