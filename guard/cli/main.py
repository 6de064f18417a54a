"""``guard``: the command line. Thin: every command calls the library.

Exit codes: 0 answered, 3 rejected or refused, 4 answered with every value withheld
(``guard query``), 2 usage, policy or state error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from guard.cli.audit_cmd import audit
from guard.cli.options import BACKEND as _BACKEND
from guard.cli.options import POLICY as _POLICY
from guard.cli.options import STATE as _STATE
from guard.cli.options import guarded as _guarded
from guard.cli.options import stderr as _stderr
from guard.cli.options import stdout as _stdout
from guard.cli.render import FORMATS, render_explanation, render_result
from guard.cli.serve_cmd import password, serve
from guard.core import Guard
from guard.policy.load import load_policy
from guard.policy.model import NARROW_MEASURE_RANGE, NoiseMode, Policy, Role
from guard.policy.model import Table as PolicyTable
from guard.state.store import StateStore

__all__ = ["NOTHING_RELEASED", "main"]

#: the exit code of ``guard query`` when an answer withholds every value it has
NOTHING_RELEASED = 4


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="statguard")
def main() -> None:
    """statguard: aggregate SQL in, protected aggregates out.

    Exit codes: 0 answered, 3 rejected or refused, 4 answered with every value withheld
    (guard query), 2 usage, policy or state error.
    """


@main.command()
@_POLICY
@click.option("--analyst", required=True, help="Who is asking (declared in the policy).")
@_STATE
@_BACKEND
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option(
    "--flags",
    is_flag=True,
    help="Add a column <label>_flag after each aggregate column: released, suppressed or noised.",
)
@click.argument("sql")
@_guarded
def query(
    policy: Path, analyst: str, state: Path | None, backend: str | None, fmt: str, flags: bool, sql: str
) -> None:
    """Answer one aggregate SQL query for ANALYST, or say why not.

    Exit codes: 0 answered; 4 answered, but every value is withheld (a warning on
    stderr says so); 3 rejected or refused; 2 usage, policy or state error.
    """
    with Guard.open(policy, state=state, backend=backend) as guard:
        result = guard.query(sql, analyst=analyst)
    err = _stderr()
    render_result(result.with_flag_columns() if flags else result, fmt, _stdout(), err)
    if result.nothing_released:
        err.print(
            "warning: every value of this answer is withheld: nothing was released "
            f"(exit code {NOTHING_RELEASED}); the notes say why",
            markup=False,
            highlight=False,
        )
        sys.exit(NOTHING_RELEASED)


@main.command()
@_POLICY
@click.option("--analyst", required=True, help="Whose request to explain (declared in the policy).")
@_STATE
@_BACKEND
@click.argument("sql")
@_guarded
def explain(policy: Path, analyst: str, state: Path | None, backend: str | None, sql: str) -> None:
    """For data stewards: which cells SQL would have withheld and why, with each
    withheld cell's feasibility interval against its protection level. Releases
    nothing. The levels derive from confidential data: do not pass them to analysts."""
    with Guard.open(policy, state=state, backend=backend) as guard:
        explanation = guard.explain(sql, analyst=analyst)
    out = _stdout()
    render_result(explanation.result, "table", out, _stderr())
    render_explanation(explanation, out)


@main.command("check-policy")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@_STATE
@_BACKEND
@_guarded
def check_policy(file: Path, state: Path | None, backend: str | None) -> None:
    """Validate a policy, load its sources, and summarise it."""
    policy = load_policy(file, state, backend)
    out = _stdout()
    with Guard.open(file, state=state, backend=backend) as guard:
        out.print(f"[bold]{policy.name}[/bold]: {file} is valid")
        full = "released" if policy.protection.allow_full_population else "withheld"
        out.print(f"  protection: k = {policy.protection.min_query_set_size} (full-population cells {full})")
        out.print(f"  state: {policy.state_dir}")
        out.print(f"  backend: {policy.backend.engine}")
        if policy.uses_noise:
            out.print(f"  {_noise_summary(policy)}", markup=False)
        for table in policy.tables:
            info = guard.backend.table_info(table.name)
            where = table.source.path.name if table.source.path else table.source.table
            summary = Table(title=f"table {table.name} ({table.source.kind.value}: {where})")
            for name in ("column", "role", "type", "bounds", "answered"):
                summary.add_column(name)
            for column in table.columns:
                unit = " (privacy unit)" if column.name == table.privacy_unit else ""
                if column.derived is not None:
                    unit = f" ({column.derived.kind.value} of {column.derived.source})"
                bounds = f"[{column.bounds[0]:g}, {column.bounds[1]:g}]" if column.bounds else ""
                kind = info.types.get(column.name.lower(), "not loaded")
                mode = ""
                if column.role is Role.MEASURE:
                    mode = (column.protection or table.noise or policy.noise.mode).value
                summary.add_row(column.name, column.role.value + unit, kind, bounds, mode)
            out.print(summary)
            for line in _measure_warnings(policy, table):
                out.print(f"  {line}", markup=False)
            out.print(
                f"  {info.rows:,} rows, {info.units:,} privacy units"
                f"{' (one row each)' if info.one_row_per_unit else ''}; "
                f"dimensions: {', '.join(table.names(Role.DIMENSION)) or 'none'}; "
                f"measures: {', '.join(table.names(Role.MEASURE)) or 'none'}"
            )
        analysts = ", ".join(
            a.name
            + (f" (tables: {', '.join(a.tables)})" if a.tables is not None else "")
            + (f" (noise: {a.noise.value})" if a.noise is not None else "")
            + (f" (budget ε {float(a.budget):g})" if a.budget is not None else "")
            for a in policy.analysts
        )
        out.print(f"  analysts: {analysts}")


def _measure_warnings(policy: Policy, table: PolicyTable) -> list[str]:
    """What a steward must know about narrow measures (a 0/1 flag): why they are noised,
    and when their sums will be refused."""
    lines = []
    budgeted = policy.noise.analyst_budget is not None or any(a.budget is not None for a in policy.analysts)
    for column in table.columns:
        if column.role is not Role.MEASURE or not column.narrow:
            continue
        if column.protection is NoiseMode.OFF:
            lines.append(
                f"WARNING: {column.name} has a narrow range and is answered exactly (noise: off): exact "
                "sums of a 0/1 measure over many overlapping groups reconstruct almost every value "
                "(Dinur & Nissim 2003), and a sum of 0 (or of the count) states every member's value"
            )
        elif column.noise is None:
            lines.append(
                f"{column.name}: answered with noise by default (its range is at most "
                f"{NARROW_MEASURE_RANGE:g} wide, so exact sums would disclose values); "
                "COUNT queries stay exact"
            )
        if column.protection is NoiseMode.NOISE and not budgeted:
            lines.append(
                f"{column.name}: no analyst has a privacy budget, so SUM/AVG of {column.name} is refused "
                "until noise.analyst_budget or analysts.NAME.budget is set (policies/README.md, noise)"
            )
    return lines


def _noise_summary(policy: Policy) -> str:
    noise = policy.noise
    modes = ", ".join(f"{t.name}: {(t.noise or noise.mode).value}" for t in policy.tables)
    threshold = noise.group_threshold if noise.group_threshold is not None else f"auto (δ ≤ {noise.delta:g})"
    budgets = f"per analyst {float(noise.analyst_budget):g}" if noise.analyst_budget is not None else ""
    if noise.global_budget is not None:
        budgets += f"{', ' if budgets else ''}global {float(noise.global_budget):g}"
    return (
        f"noise: {modes}; ε {float(noise.epsilon_per_query):g} per query; average {noise.average}; "
        f"contribution c = {noise.cells_per_unit}, m = {noise.rows_per_cell}; group threshold {threshold}; "
        f"budgets: {budgets or 'per analyst only'}"
    )


@main.command()
@_POLICY
@_STATE
@click.option("--analyst", default=None, help="Only this analyst's requests.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the last N requests.")
@click.option("--format", "fmt", type=click.Choice(("table", "json")), default="table", show_default=True)
@click.option(
    "--verify",
    is_flag=True,
    help="Check the log's hash chain and its tail against the log head; exit 3 if broken or cut.",
)
@_guarded
def log(
    policy: Path, state: Path | None, analyst: str | None, limit: int | None, fmt: str, verify: bool
) -> None:
    """Show the query log: every request, answered or not, oldest first. Opens the state
    store read-only (a copy of a state folder, or one a running server does not hold)."""
    store = StateStore(load_policy(policy, state).state_dir, read_only=True)
    try:
        records = store.log(analyst=analyst, limit=limit)
        check = store.check_chain() if verify else None
    finally:
        store.close()
    out = _stdout()
    if fmt == "json":
        for record in records:
            out.print(json.dumps(record, default=str), markup=False, highlight=False, soft_wrap=True)
    else:
        table = Table(title=f"query log ({len(records)} records)", title_justify="left")
        for name in ("id", "time (UTC)", "analyst", "decision", "sql", "reason / released"):
            table.add_column(name, overflow="fold")
        for r in records:
            detail = r["reason"] or f"{len(r['rows'] or [])} rows; " + "; ".join(r["notes"] or [])
            table.add_row(
                str(r["id"]), f"{r['ts']:%Y-%m-%d %H:%M:%S}", r["analyst"], r["decision"], r["sql"], detail
            )
        out.print(table)
    if check is not None:
        head = f"; log head: record {check.head.id}, {check.head.hash}" if check.head else "; no log head yet"
        if check.broken is None:
            _stderr().print(f"hash chain intact over {check.checked} records{head}", markup=False)
        elif check.missing:
            _stderr().print(
                f"log CUT: {check.missing} record(s) from {check.broken} on are missing from its tail{head}",
                markup=False,
            )
            sys.exit(3)
        else:
            _stderr().print(
                f"hash chain BROKEN at record {check.broken} (of {check.checked}){head}", markup=False
            )
            sys.exit(3)


@main.command()
@_POLICY
@_STATE
@click.option("--analyst", default=None, help="Only this analyst's budget and charges.")
@click.option("--format", "fmt", type=click.Choice(("table", "json")), default="table", show_default=True)
@_guarded
def budget(policy: Path, state: Path | None, analyst: str | None, fmt: str) -> None:
    """Show privacy budgets (noise mode): spent and remaining ε per analyst, group and
    overall, and every charge with the query it paid for."""
    with Guard.open(policy, state=state) as guard:
        report = guard.budget(analyst)
    out = _stdout()
    if fmt == "json":
        out.print(json.dumps(report), markup=False, highlight=False, soft_wrap=True)
        return
    accounts = Table(title="privacy budgets (ε)", title_justify="left")
    for name in ("account", "limit", "spent", "remaining"):
        accounts.add_column(name, justify="left" if name == "account" else "right")
    for a in report["accounts"]:
        accounts.add_row(a["account"], *(_epsilon(a[k]) for k in ("limit", "spent", "remaining")))
    out.print(accounts)
    charges = Table(title=f"charges ({len(report['charges'])})", title_justify="left")
    for name in ("#", "time (UTC)", "analyst", "ε", "ε global", "log id", "sql"):
        charges.add_column(name, overflow="fold")
    for c in report["charges"]:
        charges.add_row(
            str(c["sequence"]),
            c["time"],
            c["analyst"],
            _epsilon(c["epsilon"]),
            _epsilon(c["global"]),
            str(c["log_id"] or ""),
            c["sql"] or "",
        )
    out.print(charges)


def _epsilon(value: dict[str, Any] | None) -> str:
    return "-" if value is None else f"{value['value']:.6g}"


@main.command()
@_STATE
@click.option(
    "--policies",
    "policies",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder of the example policies (default: the repository's policies/).",
)
@_guarded
def demo(state: Path | None, policies: Path | None) -> None:
    """Walk through the seed examples: answers, suppressed cells, refused attacks."""
    from guard.cli.demo import run_demo

    run_demo(_stdout(), policies, state)


main.add_command(audit)
main.add_command(serve)
main.add_command(password)

if __name__ == "__main__":  # pragma: no cover
    main()
