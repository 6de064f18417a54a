"""How results, refusals and logs are printed by the CLI."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from guard.errors import GuardError
from guard.protection.explain import Explanation
from guard.result import ProtectedResult

__all__ = ["FORMATS", "render_error", "render_result", "result_table"]

FORMATS = ("table", "json", "csv")


def _cell_text(value: Any, flag: str) -> str:
    if flag == "suppressed":
        return "[dim]suppressed[/dim]"
    if value is None:
        return "[dim]NULL[/dim]"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def result_table(result: ProtectedResult, title: str | None = None) -> Table:
    table = Table(title=title, title_justify="left", show_edge=True)
    for index, name in enumerate(result.columns):
        numeric = any(
            isinstance(row[index], int | float) and not isinstance(row[index], bool) for row in result.rows
        )
        table.add_column(name, justify="right" if numeric else "left")
    for row, flags in zip(result.rows, result.flags, strict=True):
        table.add_row(*(_cell_text(v, f) for v, f in zip(row, flags, strict=True)))
    return table


def render_result(result: ProtectedResult, fmt: str, out: Console, err: Console) -> None:
    if fmt == "json":
        out.print(result.to_json(), markup=False, highlight=False, soft_wrap=True)
        return
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(result.columns)
        writer.writerows([["" if v is None else v for v in row] for row in result.rows])
        out.print(buffer.getvalue(), end="", markup=False, highlight=False, soft_wrap=True)
        for note in result.notes:
            err.print(f"note: {note}", markup=False, highlight=False)
        return
    out.print(result_table(result))
    for note in result.notes:
        out.print(f"note: {note}", markup=False, highlight=False)


def render_error(error: GuardError, fmt: str, out: Console, err: Console) -> None:
    if fmt == "json":
        out.print(json.dumps(error.to_dict()), markup=False, highlight=False, soft_wrap=True)
        return
    label = {"refused": "refused", "error": "error"}.get(error.status, "error")
    err.print(f"{label} ({error.kind}): {error.message}", markup=False, highlight=False)


def _number(x: float) -> str:
    if x != x:  # NaN: not computed
        return "n/a"
    if x == float("inf"):
        return "+inf"
    if x == float("-inf"):
        return "-inf"
    return f"{x:,.6g}"


def render_explanation(explanation: Explanation, out: Console) -> None:
    """The withheld cells with their feasibility intervals vs. protection levels."""
    if not explanation.cells:
        out.print("no cell is withheld and none is sensitive", markup=False)
        return
    table = Table(title="withheld and sensitive cells (LP audit)", title_justify="left")
    for name in ("cell", "quantity", "why", "interval", "width", "required", "ok"):
        table.add_column(name, overflow="fold")
    for c in explanation.cells:
        ok = "" if c.meets is None else ("yes" if c.meets else "NO")
        required = "" if c.required is None else _number(c.required)
        interval = "n/a" if c.low != c.low else f"[{_number(c.low)}, {_number(c.high)}]"
        table.add_row(c.cell, c.quantity, c.status, interval, _number(c.width), required, ok)
    out.print(table)
    for quantity, method in explanation.methods.items():
        out.print(f"{quantity}: secondary suppression method {method}", markup=False)
