"""``guard audit``: replay a query log offline and report what its answers disclose.

Thin: reading the log, the replay and the reports live in :mod:`guard.audit`.
Exit codes: 0 no disclosure, 3 disclosures found, 2 usage, policy, log or state error.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from guard.audit.cellsets import GuardCells
from guard.audit.chart import chart_svg
from guard.audit.logsource import LogEntry, entries_from_store, read_log
from guard.audit.offline import AuditResult, EntryOutcome, audit_log
from guard.audit.report import group_text, to_html, to_json, to_markdown
from guard.cli.options import BACKEND, POLICY, STATE
from guard.cli.options import guarded as _guarded
from guard.cli.options import stderr as _stderr
from guard.cli.options import stdout as _stdout
from guard.core import Guard
from guard.errors import GuardError

__all__ = ["audit"]

#: exit code when the log's answers disclose something
DISCLOSED = 3


@click.command("audit")
@POLICY
@STATE
@BACKEND
@click.option(
    "--log",
    "log_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A CSV (header analyst,time,sql; ts for time) or JSONL log from another system, or "
    "`guard log --format json` output. Default: the answered requests of the guard's own log.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write audit.json and the readable report (audit.md with audit.svg, or audit.html) "
    "into this folder.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("md", "html")),
    default="md",
    show_default=True,
    help="Readable report written with --out: Markdown (+ SVG chart) or HTML (chart inline).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report on stdout instead of a summary.")
@click.option("--quiet", is_flag=True, help="No progress bar (it is also off when stderr is not a terminal).")
@_guarded
def audit(
    policy: Path,
    state: Path | None,
    backend: str | None,
    log_file: Path | None,
    out_dir: Path | None,
    fmt: str,
    as_json: bool,
    quiet: bool,
) -> None:
    """Replay a query log against the data and report every disclosure its answers allow:
    each group of fewer than k respondents whose total (or count) can be derived, its size,
    the answers that combine to it and the analysts who received them. Never prints a
    protected value. Exits 3 when something was disclosed."""
    with Guard.open(policy, state=state, backend=backend) as guard:
        entries = read_log(log_file) if log_file else entries_from_store(guard.store.log())
        label = str(log_file) if log_file else f"the guard's log in {guard.policy.state_dir}"
        result = _replay(
            entries,
            GuardCells(guard.policy, guard.backend),
            guard.policy.protection.min_query_set_size,
            quiet,
        )
        document = to_json(result, policy=guard.policy.name, log=label, generated=dt.datetime.now(dt.UTC))
    if out_dir is not None:
        _write(out_dir, fmt, document, result)
    out = _stdout()
    if as_json:
        out.print(json.dumps(document, indent=2), markup=False, highlight=False, soft_wrap=True)
    else:
        _summary(out, document)
        if out_dir is not None:
            _stderr().print(f"reports written to {out_dir}", markup=False)
    if result.disclosures:
        sys.exit(DISCLOSED)


def _replay(entries: list[LogEntry], cells: GuardCells, k: int, quiet: bool) -> AuditResult:
    console = _stderr()
    columns = (
        TextColumn("replaying"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[found]} disclosure(s)"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, disable=quiet or not console.is_terminal) as progress:
        task = progress.add_task("replay", total=len(entries), found=0)
        found = 0

        def advance(outcome: EntryOutcome) -> None:
            nonlocal found
            found += len(outcome.disclosures)
            progress.update(task, advance=1, found=found)

        return audit_log(entries, cells, k, on_entry=advance)


def _write(out_dir: Path, fmt: str, document: dict[str, Any], result: AuditResult) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "audit.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        if fmt == "html":
            (out_dir / "audit.html").write_text(to_html(document), encoding="utf-8")
        else:
            (out_dir / "audit.svg").write_text(chart_svg(result.timeline) + "\n", encoding="utf-8")
            (out_dir / "audit.md").write_text(to_markdown(document, chart_href="audit.svg"), encoding="utf-8")
    except OSError as exc:
        raise GuardError(
            f"cannot write the audit report into {out_dir} ({exc.strerror}): pick another --out"
        ) from None


def _summary(out: Console, document: dict[str, Any]) -> None:
    s = document["summary"]
    out.print(
        f"{s['entries']} entries: {s['replayed']} replayed, {s['not_replayable']} not replayable; "
        f"{s['cells']} released cells; {s['determined']} determined group(s); k = {document['k']}",
        markup=False,
    )
    disclosures = [g for g in document["determined"] if g["disclosure"]]
    if not disclosures:
        out.print("no disclosure: no group of fewer than k respondents has a derivable total", markup=False)
        return
    table = Table(title=f"{len(disclosures)} disclosure(s)", title_justify="left")
    for name in ("#", "table", "statistic", "respondents", "group", "entries", "analysts", "collusion"):
        table.add_column(name, overflow="fold")
    for g in disclosures:
        table.add_row(
            str(g["number"]),
            g["table"],
            g["space"],
            str(g["units"]),
            group_text(g),
            ", ".join(f"#{n}" for n in g["entries"]),
            ", ".join(g["analysts"]),
            "yes" if g["collusion"] else "no",
        )
    out.print(table)
