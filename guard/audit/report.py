"""The offline audit's reports: a JSON document (the contract), Markdown, and HTML.

JSON schema ``statguard-audit/1`` (keys always present, in this order; times are ISO 8601
in UTC, entry times without an offset, or null)::

    {
      "schema": "statguard-audit/1",
      "policy": str, "log": str, "generated": str, "k": int,
      "summary": {"entries": int, "replayed": int, "not_replayable": int, "cells": int,
                  "determined": int, "disclosures": int, "collusions": int,
                  "analysts": [str]},          # analysts whose answers a disclosure uses
      "determined": [{      # each derivable atom, and each released cell under k units
          "number": int, "table": str, "space": "sum(<measure>)" | "count",
          "rows": int, "units": int,           # sizes only, never values or identities
          "disclosure": bool,                  # units < k
          "determined_at": int,                # seq of the entry that completed it
          "entries": [int], "cells": [{"seq": int, "cell": str}],
          "analysts": [str], "collusion": bool,
          "description": {dimension: value|null} | null}],
      "entries": [{"seq": int, "ref": str, "time": str|null, "analyst": str, "sql": str,
                   "status": "replayed" | "not_replayable", "reason": str|null,
                   "table": str|null, "cells": int, "informative": int,
                   "determined": [int], "disclosures": [int],   # group numbers
                   "notes": [str]}],
      "timeline": [{"seq": int, "time": str|null, "disclosures": int, "determined": int}]
    }

The readable reports are built from the JSON document only, so they can hold nothing
it does not; the chart comes from ``chart.py``.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

from guard.audit.chart import chart_svg, text_chart
from guard.audit.offline import AuditResult, Determined, TimelinePoint
from guard.result import NAN_TEXT, is_nan

__all__ = ["SCHEMA", "group_text", "to_html", "to_json", "to_markdown"]

SCHEMA = "statguard-audit/1"
#: rows of the "other determined groups" tables in the readable reports
_LISTED = 50


def to_json(result: AuditResult, *, policy: str, log: str, generated: dt.datetime) -> dict[str, Any]:
    """The report as a JSON-ready dict (schema in the module docstring)."""
    disclosures = result.disclosures
    return {
        "schema": SCHEMA,
        "policy": policy,
        "log": log,
        "generated": _time(generated),
        "k": result.k,
        "summary": {
            "entries": len(result.entries),
            "replayed": len(result.entries) - len(result.not_replayable),
            "not_replayable": len(result.not_replayable),
            "cells": sum(e.cells for e in result.entries),
            "determined": len(result.determined),
            "disclosures": len(disclosures),
            "collusions": sum(d.collusion for d in disclosures),
            "analysts": sorted({a for d in disclosures for a in d.analysts}),
        },
        "determined": [_group(d) for d in result.determined],
        "entries": [
            {
                "seq": e.entry.seq,
                "ref": e.entry.ref,
                "time": _time(e.entry.time),
                "analyst": e.entry.analyst,
                "sql": e.entry.sql,
                "status": e.status.value,
                "reason": e.reason,
                "table": e.table,
                "cells": e.cells,
                "informative": e.informative,
                "determined": list(e.determined),
                "disclosures": list(e.disclosures),
                "notes": list(e.notes),
            }
            for e in result.entries
        ],
        "timeline": [
            {"seq": p.seq, "time": _time(p.time), "disclosures": p.disclosures, "determined": p.determined}
            for p in result.timeline
        ],
    }


def to_markdown(document: Mapping[str, Any], chart_href: str | None = None) -> str:
    """A readable report from :func:`to_json`'s document; ``chart_href`` links an SVG file."""
    s = document["summary"]
    out = [f"# Offline audit of {document['log']}", ""]
    out += [_headline(document), ""]
    out += ["## Disclosures over time", ""]
    if chart_href:
        out += [f"![cumulative disclosures over the log]({chart_href})", ""]
    out += ["```text", text_chart(_points(document)), "```", ""]
    disclosures = [g for g in document["determined"] if g["disclosure"]]
    if disclosures:
        out += ["## Disclosures", ""]
        out += ["| # | table | statistic | respondents | group | entries | analysts | collusion |"]
        out += ["|---|---|---|---|---|---|---|---|"]
        for g in disclosures:
            out.append(
                f"| {g['number']} | {g['table']} | {g['space']} | {g['units']} | {_md(group_text(g))} | "
                f"{_entry_list(g['entries'])} | {', '.join(g['analysts'])} | "
                f"{'yes' if g['collusion'] else 'no'} |"
            )
        out.append("")
        entries = {e["seq"]: e for e in document["entries"]}
        for g in disclosures:
            out += [f"### Disclosure {g['number']}: {_md(group_text(g))}", ""]
            out.append(
                f"The {g['space']} total of {g['units']} respondent(s) ({g['rows']} row(s)) of "
                f"table {g['table']} follows from these answers (complete at entry #{g['determined_at']}):"
            )
            out.append("")
            for cell in g["cells"]:
                e = entries[cell["seq"]]
                out.append(
                    f"- #{e['seq']} {e['analyst']} {e['time'] or ''} ({e['ref']}), cell {_md(cell['cell'])}: "
                    f"`{_code(e['sql'])}`"
                )
            out.append("")
    others = [g for g in document["determined"] if not g["disclosure"]]
    if others:
        out += [f"## Other determined groups (at least k = {document['k']} respondents)", ""]
        out += ["| # | table | statistic | respondents | group | entries |", "|---|---|---|---|---|---|"]
        for g in others[:_LISTED]:
            out.append(
                f"| {g['number']} | {g['table']} | {g['space']} | {g['units']} | "
                f"{_md(group_text(g))} | {_entry_list(g['entries'])} |"
            )
        if len(others) > _LISTED:
            out.append(f"\n{len(others) - _LISTED} more in the JSON report.")
        out.append("")
    skipped = [e for e in document["entries"] if e["status"] == "not_replayable"]
    if skipped:
        out += [f"## Not replayable ({s['not_replayable']})", ""]
        out += ["| # | source | analyst | sql | reason |", "|---|---|---|---|---|"]
        for e in skipped:
            cells = (
                str(e["seq"]),
                _md(e["ref"]),
                _md(e["analyst"]),
                f"`{_code(e['sql'])}`",
                _md(e["reason"]),
            )
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    noted = [e for e in document["entries"] if e["notes"]]
    if noted:
        out += ["## Notes", ""]
        for e in noted:
            out.append(f"- #{e['seq']} ({_md(e['ref'])}): {_md('; '.join(e['notes']))}")
        out.append("")
    return "\n".join(out)


def to_html(document: Mapping[str, Any]) -> str:
    """A self-contained HTML page: the Markdown report's content with the SVG chart inline."""
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Offline audit of {esc(document['log'])}</title>",
        "<style>body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
        "table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.25rem .5rem;"
        "text-align:left;vertical-align:top}code{font-size:.9em}.yes{color:#b00020;font-weight:bold}</style>",
        "</head><body>",
        f"<h1>Offline audit of {esc(document['log'])}</h1>",
        f"<p>{esc(_headline(document))}</p>",
        "<h2>Disclosures over time</h2>",
        chart_svg(_points(document)),
    ]
    entries = {e["seq"]: e for e in document["entries"]}
    disclosures = [g for g in document["determined"] if g["disclosure"]]
    if disclosures:
        parts.append("<h2>Disclosures</h2>")
        rows = []
        for g in disclosures:
            combined = "".join(
                f"<li>#{c['seq']} {esc(entries[c['seq']]['analyst'])} "
                f"{esc(entries[c['seq']]['time'] or '')}, cell {esc(c['cell'])}: "
                f"<code>{esc(entries[c['seq']]['sql'])}</code></li>"
                for c in g["cells"]
            )
            collusion = '<span class="yes">yes</span>' if g["collusion"] else "no"
            rows.append(
                [
                    str(g["number"]),
                    esc(g["table"]),
                    esc(g["space"]),
                    str(g["units"]),
                    esc(group_text(g)),
                    f"<ul>{combined}</ul>",
                    esc(", ".join(g["analysts"])),
                    collusion,
                ]
            )
        parts.append(
            _html_table(
                [
                    "#",
                    "table",
                    "statistic",
                    "respondents",
                    "group",
                    "answers combined",
                    "analysts",
                    "collusion",
                ],
                rows,
            )
        )
    others = [g for g in document["determined"] if not g["disclosure"]]
    if others:
        parts.append(f"<h2>Other determined groups (at least k = {document['k']} respondents)</h2>")
        rows = [
            [
                str(g["number"]),
                esc(g["table"]),
                esc(g["space"]),
                str(g["units"]),
                esc(group_text(g)),
                esc(_entry_list(g["entries"])),
            ]
            for g in others[:_LISTED]
        ]
        parts.append(_html_table(["#", "table", "statistic", "respondents", "group", "entries"], rows))
        if len(others) > _LISTED:
            parts.append(f"<p>{len(others) - _LISTED} more in the JSON report.</p>")
    skipped = [e for e in document["entries"] if e["status"] == "not_replayable"]
    if skipped:
        parts.append(f"<h2>Not replayable ({len(skipped)})</h2>")
        rows = [
            [
                str(e["seq"]),
                esc(e["ref"]),
                esc(e["analyst"]),
                f"<code>{esc(e['sql'])}</code>",
                esc(e["reason"]),
            ]
            for e in skipped
        ]
        parts.append(_html_table(["#", "source", "analyst", "sql", "reason"], rows))
    noted = [e for e in document["entries"] if e["notes"]]
    if noted:
        parts.append("<h2>Notes</h2><ul>")
        parts += [f"<li>#{e['seq']} ({esc(e['ref'])}): {esc('; '.join(e['notes']))}</li>" for e in noted]
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _points(document: Mapping[str, Any]) -> list[TimelinePoint]:
    return [
        TimelinePoint(
            p["seq"],
            dt.datetime.fromisoformat(p["time"]) if p["time"] else None,
            p["disclosures"],
            p["determined"],
        )
        for p in document["timeline"]
    ]


def _headline(document: Mapping[str, Any]) -> str:
    s = document["summary"]
    collusion = f", {s['collusions']} needing answers given to several analysts" if s["collusions"] else ""
    return (
        f"Policy {document['policy']}, k = {document['k']} respondents; generated {document['generated']}. "
        f"{s['disclosures']} disclosure(s){collusion}: groups of fewer than k respondents whose "
        f"total the answers determine. {s['entries']} entries ({s['replayed']} replayed, "
        f"{s['not_replayable']} not replayable), {s['cells']} released cells, "
        f"{s['determined']} determined group(s) in all."
    )


def _group(d: Determined) -> dict[str, Any]:
    return {
        "number": d.number,
        "table": d.table,
        "space": d.space,
        "rows": d.rows,
        "units": d.units,
        "disclosure": d.disclosure,
        "determined_at": d.seq,
        "entries": list(d.entries),
        "cells": [{"seq": c.seq, "cell": c.cell} for c in d.cells],
        "analysts": list(d.analysts),
        "collusion": d.collusion,
        "description": None if d.description is None else {k: _value(v) for k, v in d.description.items()},
    }


def group_text(group: Mapping[str, Any]) -> str:
    """A determined group of the JSON document in words: its shared dimension values."""
    description = group["description"]
    if description is None:
        return f"{group['rows']} rows (not described)"
    if not description:
        return "rows sharing no dimension value"
    return ", ".join(f"{k} IS NULL" if v is None else f"{k}={v!r}" for k, v in description.items())


def _entry_list(seqs: Sequence[int]) -> str:
    return ", ".join(f"#{s}" for s in seqs)


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _md(text: str | None) -> str:
    """Text safe inside a Markdown table cell."""
    return (text or "").replace("|", "\\|").replace("\n", " ")


def _code(sql: str) -> str:
    return " ".join(sql.split()).replace("`", "'").replace("|", "\\|")


def _time(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _value(value: Any) -> Any:
    """A description value as JSON (dates as ISO text; a NaN as the log names it, since
    JSON has no NaN and null is the NULL group: audit.json stays strict JSON)."""
    if isinstance(value, dt.date | dt.datetime | dt.time):
        return value.isoformat()
    if is_nan(value):
        return NAN_TEXT
    return json.loads(json.dumps(value, default=str))
