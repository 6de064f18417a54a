"""Top-n contributions on PostgreSQL and Spark: the WINDOW template against MAX_JOIN.

Reproduce (from the repository root, in the project's virtualenv)::

    python benchmarks/bench_topn.py --engines postgres,spark --rows 1000000
    python benchmarks/bench_topn.py --rows 100000 --repeat 3            # smoke run
    python benchmarks/bench_topn.py --engines postgres --rows-per-unit 4  # panel data

For each engine of ``--engines`` (the throw-away PostgreSQL cluster and local Spark
session of bench_backends.py) it opens the guard on bench_core's ``people`` data, and
for each query with a SUM or AVG (bench_core.QUERIES and one ROLLUP of
GROUPING_QUERIES) builds the cell query at ``--depth`` with each top-n template:
``TopN.WINDOW`` (row_number() over all per-unit partials) and ``TopN.MAX_JOIN`` (a
per-cell bound taken with MAX, a join, and row_number() over the few contributions
that reach it; over the rows themselves with one row per unit; guard/plan/topn.py),
and at depth 0 as a reference (the cell query without contributions). It runs each
once untimed, then ``--repeat`` interleaved rounds (the order of the sides alternates),
timing ``backend.execute`` of the rewritten SQL alone, as Guard.query runs it, and
checks that both templates give the same cells (keys, values, unit counts, top lists,
magnitudes).

The Markdown report goes to stdout (and ``--out``); progress to stderr. Exit status 1
if the templates disagree on a cell or a query failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: the repository root holds benchmarks/ and tests/
    sys.path.insert(0, str(ROOT))

from benchmarks import bench_backends, bench_core  # noqa: E402
from benchmarks.bench_backends import progress  # noqa: E402
from benchmarks.bench_core import geomean, markdown_table, time_ms  # noqa: E402
from guard import Guard  # noqa: E402
from guard.backends.base import Backend, TopN  # noqa: E402
from guard.cells import CellGrid, cells_from_result  # noqa: E402

ENGINES = ("postgres", "spark", "duckdb")
#: bench_core's queries with a SUM or AVG (the others have no contributions to rank),
#: and a ROLLUP (per-unit partials on both templates)
QUERY_IDS = ("q02", "q06", "q08", "q10", "q13", "q14", "q16", "q18", "q20", "r1")
#: the sides of each round: label -> (template, depth or None for --depth)
SIDES: dict[str, tuple[TopN, int | None]] = {
    "window": (TopN.WINDOW, None),
    "max_join": (TopN.MAX_JOIN, None),
    "depth 0": (TopN.WINDOW, 0),
}


@dataclass(frozen=True)
class Timing:
    id: str
    cells: int
    #: side label -> median ms
    ms: dict[str, float]
    problems: tuple[str, ...] = ()
    error: str | None = None

    @property
    def ratio(self) -> float:
        return self.ms["max_join"] / self.ms["window"]


def _queries() -> list[tuple[str, str]]:
    known = dict(bench_core.QUERIES) | dict(bench_core.GROUPING_QUERIES)
    return [(q, known[q]) for q in QUERY_IDS]


def cell_queries(g: Guard, sql: str, depth: int) -> tuple[Any, Any, dict[str, Any]]:
    """The shape, table facts and, per side, the rewritten cell query of ``sql`` (as
    Guard.query builds it: bench_backends.cell_query, with the template swapped)."""
    from guard.plan.rewrite import rewrite
    from guard.protection.sums import with_sums
    from guard.query.analyze import analyze
    from guard.query.parse import parse
    from guard.query.validate import validate

    policy, backend = g.policy, g.backend
    select, table = validate(parse(sql, policy.limits), bench_core.visible_tables(g))
    info = backend.table_info(table.name)
    shape = with_sums(analyze(select, table, info.types, policy.limits))
    plans = {}
    for label, (top_n, fixed) in SIDES.items():
        capabilities = dataclasses.replace(backend.capabilities, top_n=top_n)
        plans[label] = rewrite(shape, info, depth if fixed is None else fixed, capabilities)
    return shape, info, plans


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):  # AVG: a DOUBLE division or the engine's AVG
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    return bool(a == b)


def compare(window: CellGrid, joined: CellGrid) -> list[str]:
    """Where the two templates' cells differ (at most a few lines)."""
    if (window.keys, window.rolled_up) != (joined.keys, joined.rolled_up):
        return [f"different rows: {len(window.keys)} cells vs {len(joined.keys)}"]
    problems = []
    for keys, rolled, a, b in zip(window.keys, window.rolled_up, window.cells, joined.cells, strict=True):
        for x, y in zip(a, b, strict=True):
            same = _same(x.value, y.value) and x.units == y.units and x.top == y.top
            if not (same and _same(x.magnitude, y.magnitude)):
                problems.append(f"cell {keys} {rolled}: window {x} max_join {y}")
    return problems[:5]


def time_query(g: Guard, qid: str, sql: str, depth: int, repeat: int) -> Timing:
    backend: Backend = g.backend
    try:
        shape, info, plans = cell_queries(g, sql, depth)
        sides: dict[str, Callable[[], Any]] = {
            label: (lambda p=plan: backend.execute(p.query)) for label, plan in plans.items()
        }
        grids = {}
        for label, run in sides.items():  # the warm-up round, also the answers compared
            grids[label] = cells_from_result(shape, plans[label], run(), info)
        times: dict[str, list[float]] = {label: [] for label in sides}
        labels = list(sides)
        with bench_core.collected():
            for round_ in range(repeat):
                # interleaved, in alternating order, so drift and caches hit every side alike
                for label in labels if round_ % 2 == 0 else labels[::-1]:
                    times[label].append(time_ms(sides[label]))
    except Exception as error:
        return Timing(qid, 0, {}, error=f"{type(error).__name__}: {str(error).splitlines()[0]}")
    problems = compare(grids["window"], grids["max_join"])
    cells = len(grids["window"].keys)
    return Timing(qid, cells, {k: statistics.median(v) for k, v in times.items()}, tuple(problems))


@dataclass(frozen=True)
class EngineRun:
    engine: str
    timings: list[Timing]
    error: str | None = None


def run_engine(
    engine: bench_backends.Engine, data: bench_core.Dataset, args: argparse.Namespace
) -> EngineRun:
    with tempfile.TemporaryDirectory(prefix=f"statguard-bench-topn-{engine.name}-") as scratch:
        policy = bench_backends.policy_copy(data, engine.section(), Path(scratch), engine.name)
        progress(f"[{engine.name}] Guard.open (builds the snapshot) ...")
        with Guard.open(policy, state=Path(scratch) / "state", backend=engine.name) as g:
            timings = []
            for qid, sql in _queries():
                t = time_query(g, qid, sql, args.depth, args.repeat)
                timings.append(t)
                if t.error:
                    progress(f"  {qid}: FAILED: {t.error}")
                else:
                    progress(
                        f"  {qid}: window {t.ms['window']:9.1f} ms   max_join {t.ms['max_join']:9.1f} ms   "
                        f"x{t.ratio:5.2f}   depth 0 {t.ms['depth 0']:9.1f} ms"
                        + ("   MISMATCH" if t.problems else "")
                    )
    return EngineRun(engine.name, timings)


def measure(engine: bench_backends.Engine, data: bench_core.Dataset, args: argparse.Namespace) -> EngineRun:
    """run_engine, or the reason it failed: one broken engine does not lose the others."""
    try:
        return run_engine(engine, data, args)
    except Exception as error:
        progress(f"[{engine.name}] FAILED: {error!r}")
        return EngineRun(engine.name, [], f"{type(error).__name__}: {error}")


def _ms(value: float) -> str:
    return f"{value:,.1f}" if value >= 100 else f"{value:.2f}"


def report(data: bench_core.Dataset, runs: list[EngineRun], args: argparse.Namespace) -> str:
    env = bench_core.environment()
    env["load average (1, 5, 15 min)"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    out = ["# Top-n contributions: WINDOW against MAX_JOIN\n"]
    out.append("`" + " ".join(["python benchmarks/bench_topn.py", *args.argv]) + "`\n")
    out.append(markdown_table(["", ""], [[k, v] for k, v in env.items()], right=False))
    per_unit = "one row per unit" if data.rows_per_unit == 1 else f"{data.rows_per_unit} rows per unit"
    out.append(
        f"\nData: {data.rows:,} rows ({per_unit}), seed {data.seed} (sha256 {data.sha256[:16]}…). "
        f"Cell query alone (`backend.execute` of the rewritten SQL) at depth {args.depth}; median of "
        f"{args.repeat} interleaved runs after 1 warm-up; depth 0 = the same cell query without "
        "contributions, for reference. x = max_join / window (< 1: MAX_JOIN faster).\n"
    )
    out.append("Queries:\n")
    out.extend(f"- {qid}: `{sql}`" for qid, sql in _queries())
    for r in runs:
        out.append(f"\n## {r.engine}\n")
        if r.error:
            out.append(f"**failed**: {r.error}")
            continue
        rows = []
        for t in r.timings:
            if t.error:
                rows.append([t.id, "n/a", "FAILED", "n/a", "n/a", "n/a", "n/a"])
                continue
            check = "same" if not t.problems else f"{len(t.problems)} differ"
            row = [t.id, str(t.cells), _ms(t.ms["window"]), _ms(t.ms["max_join"]), f"**{t.ratio:.2f}**"]
            rows.append([*row, _ms(t.ms["depth 0"]), check])
        done = [t for t in r.timings if not t.error]
        if done:
            total = [sum(t.ms[s] for t in done) for s in ("window", "max_join", "depth 0")]
            rows.append(
                [
                    "**geomean x / sums**",
                    "",
                    _ms(total[0]),
                    _ms(total[1]),
                    f"**{geomean([t.ratio for t in done]):.2f}**",
                    _ms(total[2]),
                    "",
                ]
            )
        header = ["id", "cells", "window ms", "max_join ms", "x", "depth 0 ms", "cells"]
        out.append(markdown_table(header, rows))
        for t in r.timings:
            if t.error:
                out.append(f"- {t.id}: failed: {t.error}")
            out.extend(f"- {t.id}: {p}" for p in t.problems)
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="postgres,spark", help="comma-separated: " + ", ".join(ENGINES))
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the people table")
    parser.add_argument("--rows-per-unit", type=int, default=1, help="rows per person (default 1)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per query and side (default 5)")
    parser.add_argument("--depth", type=int, default=3, help="top contributions per cell (default 3)")
    bench_backends.add_engine_arguments(parser)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = argv
    args.pg_raw_dsn = None  # bench_backends.PostgresEngine's raw baseline: not used here
    names = [n.strip() for n in args.engines.split(",") if n.strip()]
    unknown = [n for n in names if n not in ENGINES]
    if unknown or not names:
        raise SystemExit(f"--engines: unknown {', '.join(unknown) or '(none)'}; known: {', '.join(ENGINES)}")
    data = bench_core.generate(args.data.resolve(), args.rows, args.rows_per_unit, args.seed, 5)
    progress(f"data: {data.parquet}")
    runs = []
    with tempfile.TemporaryDirectory(prefix="statguard-bench-topn-") as scratch:
        for name in names:
            engine = bench_backends.make_engine(name, args, Path(scratch))
            try:  # one engine at a time on the machine
                runs.append(measure(engine, data, args))
            finally:
                engine.stop()
    text = report(data, runs, args)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        progress(f"report written to {args.out}")
    failed = any(r.error or t.error or t.problems for r in runs for t in r.timings)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
