"""Noise-mode harness: latency against raw DuckDB and the error of what the guard releases.

Reproduce (from the repository root, in the project's virtualenv)::

    python benchmarks/bench_noise.py                           # 1,000,000 rows, 7 rounds, 30 draws
    python benchmarks/bench_noise.py --rows 100000 --repeat 3  # quick look
    python benchmarks/bench_noise.py --rows-per-unit 10        # panel: m = 10 rows per cell
    python benchmarks/bench_noise.py --json benchmarks/.data/noise-1m.json

Side by side with SmartNoise SQL (in its own virtualenv, never the project's)::

    python3 -m venv /tmp/snsql
    /tmp/snsql/bin/pip install smartnoise-sql==1.0.10 duckdb pandas pyarrow numpy
    python benchmarks/bench_noise.py --workload-only           # data + workload JSON only
    /tmp/snsql/bin/python benchmarks/bench_noise_smartnoise.py \\
        benchmarks/.data/people-1000000-s20240601-noise-workload.json \\
        --json benchmarks/.data/smartnoise-1m.json
    python benchmarks/bench_noise.py --smartnoise-results benchmarks/.data/smartnoise-1m.json

What it does:

1. Generates (or reuses) the table of ``bench_core.py`` (``people``, numpy seed
   ``--seed``) and writes a noise-mode policy next to it: ``mode: noise``,
   ``epsilon_per_query: 1``, the measure bounds of ``bench_core`` (income [0, 500000],
   hours [0, 80]), a budget of 1e9 per analyst, contribution c = 1 cell per grouping
   level and m = ``--rows-per-unit`` rows per cell (1 with one row per person), δ = 1e-6
   for the group threshold. It also writes the workload as JSON (queries, bounds,
   contribution) for ``bench_noise_smartnoise.py``.
2. Latency. The noise cache answers a repeated query from memory (no ε, no draws), so
   every timed run must be a fresh draw: each round opens the guard on a FRESH state
   folder (the snapshot is copied from a template, so only its log, ledger and draw
   cache are new), primes it with one query outside the workload, then runs every query
   once, interleaved with the same SQL on raw DuckDB (in-memory table) and on the guard's
   snapshot, then once more on the same guard (the cached answer). ``--warmup`` rounds
   are untimed, ``--repeat`` rounds timed; medians per query, their ratio, and the median
   and geometric mean of the ratios. Every fresh run must report "ε = 1 spent" and every
   repeat "no ε spent"; the harness counts the exceptions.
3. Error. For each query (without ORDER BY / LIMIT, which only pick among released rows)
   the guard measures the bounded statistics once (``NoiseStage.measure``), then
   ``--draws`` times draws fresh noise and builds the answer exactly as a release on an
   empty cache does (``Prepared.draw({})`` then ``Prepared.answer``). Per released cell
   the relative error is ``|noisy - true| / max(|true|, 1)``, true = raw DuckDB; the
   harness reports its mean (and median) per query and the fraction of GROUP BY rows the
   group threshold hid.
4. Where the time goes: the stages of the noise path per query (engine, prepare, draw,
   answer; the rest is parse, budget and log), and the samplers' speed per call with the
   secure source (``noisy_count``, ``noisy_sum``) and of the automatic group threshold.

The target from the issue: the guard in noise mode under 2x raw DuckDB (median of the
per-query ratios) and no worse error than SmartNoise SQL at equal ε.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import sqlglot
import yaml
from sqlglot import exp

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_core  # the data, the raw baseline and the timing helpers

from guard import Guard, GuardError

ANALYST = bench_core.ANALYST
EPSILON = 1
DELTA = 1e-6
BUDGET = 1_000_000_000
TARGET_RATIO = 2.0
#: the workload of bench_core plus one ROLLUP (its cells overlap no other query's)
ROLLUP = (
    "r1",
    "SELECT age_band, sex, COUNT(*), SUM(hours) FROM people WHERE year >= 2017 "
    "GROUP BY ROLLUP (age_band, sex)",
)
QUERIES: tuple[tuple[str, str], ...] = (*bench_core.QUERIES, ROLLUP)
#: run on every fresh guard before timing (first-query costs); no workload cell shares its selection
PRIMER = "SELECT COUNT(*) FROM people WHERE year = 2015"
FRESH_NOTE = f"ε = {EPSILON} spent on this query"
CACHED_NOTE = "no ε spent"
#: the issue's numbers for SmartNoise SQL 1.0.10 on the same 1M-row workload on DuckDB
ISSUE_SMARTNOISE = {"median_ms": 390.0, "ratio": 20.0}


# --------------------------------------------------------------------------- data and policy


@dataclass(frozen=True)
class Setup:
    data: bench_core.Dataset
    policy: Path
    workload: Path
    cells_per_unit: int
    rows_per_cell: int


def noise_policy_text(parquet_name: str, cells_per_unit: int, rows_per_cell: int) -> str:
    """bench_core's policy (same table, columns and bounds) with noise mode instead of k."""
    policy = yaml.safe_load(bench_core._policy_text(parquet_name, 5))
    policy.pop("protection")
    policy["name"] = "people-noise"
    policy["noise"] = {
        "mode": "noise",
        "epsilon_per_query": EPSILON,
        "average": "ratio",
        "contribution": {"cells_per_unit": cells_per_unit, "rows_per_cell": rows_per_cell},
        "delta": DELTA,
        "budgets": {"per_analyst": BUDGET},
    }
    header = "# Generated by benchmarks/bench_noise.py: bench_core's table in noise mode.\n"
    return header + yaml.safe_dump(policy, sort_keys=False, allow_unicode=True)


def measure_bounds(policy: Path) -> dict[str, list[float]]:
    table = yaml.safe_load(policy.read_text())["tables"]["people"]
    return {name: spec["bounds"] for name, spec in table["columns"].items() if "bounds" in spec}


def key_positions(sql: str) -> list[int]:
    """Output positions of the plain columns (the group keys) of ``sql``."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    assert isinstance(tree, exp.Select)
    return [i for i, p in enumerate(tree.expressions) if isinstance(p.unalias(), exp.Column)]


def without_order(sql: str) -> str:
    """``sql`` without ORDER BY / LIMIT / OFFSET: they only pick among the released rows."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    for arg in ("order", "limit", "offset"):
        tree.set(arg, None)
    return tree.sql(dialect="duckdb")


def prepare_setup(args: argparse.Namespace) -> Setup:
    out = args.out.resolve()
    data = bench_core.generate(out, args.rows, args.rows_per_unit, args.seed, 5)
    c = args.cells_per_unit
    m = args.rows_per_cell or args.rows_per_unit
    stem = data.parquet.stem
    policy = out / f"{stem}-noise-c{c}-m{m}.yaml"
    policy.write_text(noise_policy_text(data.parquet.name, c, m))
    workload = out / f"{stem}-noise-workload.json"
    document = {
        "parquet": str(data.parquet),
        "rows": data.rows,
        "rows_per_unit": data.rows_per_unit,
        "sha256": data.sha256,
        "epsilon": EPSILON,
        "delta": DELTA,
        "cells_per_unit": c,
        "rows_per_cell": m,
        "bounds": measure_bounds(policy),
        "queries": [
            {"id": qid, "sql": sql, "unordered": without_order(sql), "keys": key_positions(sql)}
            for qid, sql in QUERIES
        ],
    }
    workload.write_text(json.dumps(document, indent=2))
    return Setup(data, policy, workload, c, m)


# --------------------------------------------------------------------------- fresh guards


def template_state(policy: Path, root: Path) -> tuple[Path, float]:
    """Open the guard once on ``root/template`` (builds the snapshot); returns the folder
    and the seconds the first open took."""
    state = root / "template"
    started = time.perf_counter()
    Guard.open(policy, state=state).close()
    return state, time.perf_counter() - started


def fresh_guard(policy: Path, template: Path, state: Path) -> Guard:
    """A guard on a new state folder (empty log, ledger and draw cache) whose snapshot is
    copied from ``template`` instead of rebuilt."""
    shutil.rmtree(state, ignore_errors=True)
    snapshots = template / "snapshots"
    if snapshots.is_dir():
        shutil.copytree(snapshots, state / "snapshots")
    g = Guard.open(policy, state=state)
    g.query(PRIMER, analyst=ANALYST)
    return g


# --------------------------------------------------------------------------- latency


@dataclass
class Latency:
    id: str
    sql: str
    raw_ms: list[float] = field(default_factory=list)
    snap_ms: list[float] = field(default_factory=list)
    guard_ms: list[float] = field(default_factory=list)
    cached_ms: list[float] = field(default_factory=list)
    rows: int = 0
    #: fresh runs that did not spend the full ε, repeats that spent some
    not_fresh: int = 0
    not_cached: int = 0

    def median(self, side: str) -> float:
        times: list[float] = getattr(self, f"{side}_ms")
        return statistics.median(times)

    @property
    def ratio(self) -> float:
        return self.median("guard") / self.median("raw")

    @property
    def cached_ratio(self) -> float:
        return self.median("cached") / self.median("raw")

    def summary(self) -> dict[str, Any]:
        sides = ("raw", "snap", "guard", "cached")
        medians = {f"{s}_ms": self.median(s) for s in sides if getattr(self, f"{s}_ms")}
        counts = {"rows": self.rows, "not_fresh": self.not_fresh, "not_cached": self.not_cached}
        ratios = {"ratio": self.ratio, "cached_ratio": self.cached_ratio}
        return {"id": self.id, "sql": self.sql, **medians, **ratios, **counts}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return (time.perf_counter() - started) * 1000.0, value


def run_round(g: Guard, raw: duckdb.DuckDBPyConnection, results: list[Latency], keep: bool) -> None:
    """Every query once: raw, snapshot, guard (fresh draw), guard again (cached)."""
    snapshot = bench_core.snapshot_cursor(g)
    gc.collect()
    for result in results:
        raw_ms = bench_core.time_ms(functools.partial(bench_core._fetch, raw, result.sql))
        snap_ms = None
        if snapshot is not None:
            snap_ms = bench_core.time_ms(functools.partial(bench_core._fetch, snapshot, result.sql))
        ask = functools.partial(g.query, result.sql, analyst=ANALYST)
        guard_ms, answer = timed(ask)
        cached_ms, again = timed(ask)
        if not keep:
            continue
        result.raw_ms.append(raw_ms)
        if snap_ms is not None:
            result.snap_ms.append(snap_ms)
        result.guard_ms.append(guard_ms)
        result.cached_ms.append(cached_ms)
        result.rows = len(answer.rows)
        result.not_fresh += not any(FRESH_NOTE in note for note in answer.notes)
        result.not_cached += not any(CACHED_NOTE in note for note in again.notes)


def measure_latency(
    setup: Setup, raw: duckdb.DuckDBPyConnection, root: Path, warmup: int, repeat: int
) -> tuple[list[Latency], dict[str, float]]:
    template, first_open = template_state(setup.policy, root)
    results = [Latency(qid, sql) for qid, sql in QUERIES]
    opens: list[float] = []
    for round_ in range(warmup + repeat):
        state = root / "round"
        open_ms, g = timed(functools.partial(fresh_guard, setup.policy, template, state))
        opens.append(open_ms)
        try:
            run_round(g, raw, results, keep=round_ >= warmup)
        finally:
            g.close()
        label = "warm-up" if round_ < warmup else "timed"
        print(f"  round {round_ + 1} ({label}) done", file=sys.stderr)
    costs = {
        "first Guard.open (builds the snapshot), s": first_open,
        "fresh guard per round (copy snapshot + open + primer), median ms": statistics.median(opens),
    }
    return results, costs


# --------------------------------------------------------------------------- error


@dataclass
class ErrorStats:
    id: str
    draws: int
    #: per aggregate output name: mean relative error over released cells and draws
    by_column: dict[str, float]
    mean: float
    median: float
    cells: int
    released_cells: float
    raw_rows: int
    #: mean over draws of the share of GROUP BY rows the threshold hid (None: no GROUP BY)
    hidden: float | None
    #: cache keys this query shares with earlier queries of the workload (same round)
    shared_keys: int = 0

    @property
    def hidden_percent(self) -> float | None:
        return None if self.hidden is None else 100 * self.hidden


def analyzed(g: Guard, sql: str) -> tuple[Any, Any, Any]:
    """(shape, table, info) of ``sql`` as Guard.query computes them (internal API)."""
    from guard.query.analyze import analyze
    from guard.query.parse import parse
    from guard.query.validate import validate

    select, table = validate(parse(sql, g.policy.limits), bench_core.visible_tables(g))
    info = g.backend.table_info(table.name)
    return analyze(select, table, info.types, g.policy.limits), table, info


def truth_of(
    raw: duckdb.DuckDBPyConnection, sql: str, keys: Sequence[int]
) -> dict[tuple[Any, ...], list[Any]]:
    return {tuple(row[i] for i in keys): list(row) for row in raw.execute(sql).fetchall()}


def relative_errors(
    rows: Sequence[Sequence[Any]],
    truth: dict[tuple[Any, ...], list[Any]],
    keys: Sequence[int],
    values: Sequence[int],
) -> list[list[float]]:
    """Per aggregate position, the relative error of every released cell."""
    errors: list[list[float]] = [[] for _ in values]
    for row in rows:
        true_row = truth[tuple(row[i] for i in keys)]
        for j, i in enumerate(values):
            true = float(true_row[i]) if true_row[i] is not None else 0.0
            errors[j].append(abs(float(row[i]) - true) / max(abs(true), 1.0))
    return errors


def query_errors(
    g: Guard, raw: duckdb.DuckDBPyConnection, qid: str, sql: str, draws: int
) -> tuple[ErrorStats, set[str]]:
    """Relative errors of ``draws`` fresh releases of ``sql`` (ORDER BY / LIMIT removed)."""
    unordered = without_order(sql)
    keys = key_positions(sql)
    shape, table, info = analyzed(g, unordered)
    prepared = g.noise.measure(shape, table, info, g.backend.execute)  # type: ignore[union-attr]
    truth = truth_of(raw, unordered, keys)
    columns: list[str] = []
    values: list[int] = []
    errors: list[list[float]] = []
    hidden: list[float] = []
    released = 0
    for _ in range(draws):
        answer = prepared.answer(prepared.draw({}))
        if not columns:
            values = [i for i in range(len(answer.columns)) if i not in keys]
            columns = [answer.columns[i] for i in values]
            errors = [[] for _ in values]
        for j, cell_errors in enumerate(relative_errors(answer.rows, truth, keys, values)):
            errors[j].extend(cell_errors)
        released += len(answer.rows) * len(values)
        if shape.group_by:
            hidden.append(1.0 - len(answer.rows) / len(truth))
    flat = [e for column in errors for e in column]
    used = {key for row in prepared.cache_keys for key in row.values()}
    stats = ErrorStats(
        qid,
        draws,
        {name: statistics.fmean(e) if e else math.nan for name, e in zip(columns, errors, strict=True)},
        statistics.fmean(flat) if flat else math.nan,
        statistics.median(flat) if flat else math.nan,
        len(truth) * len(values),
        released / draws,
        len(truth),
        statistics.fmean(hidden) if hidden else None,
    )
    return stats, used


def measure_errors(g: Guard, raw: duckdb.DuckDBPyConnection, draws: int) -> list[ErrorStats]:
    out = []
    seen: set[str] = set()
    for qid, sql in QUERIES:
        stats, used = query_errors(g, raw, qid, sql, draws)
        stats.shared_keys = len(used & seen)
        seen |= used
        out.append(stats)
        hidden = "" if stats.hidden is None else f", {stats.hidden:.1%} rows hidden"
        print(f"  {qid}: mean relative error {stats.mean:.3g}{hidden}", file=sys.stderr)
    return out


# --------------------------------------------------------------------------- where the time goes


def stage_breakdown(g: Guard, sql: str, repeat: int) -> dict[str, float]:
    """Median ms of the noise path's stages for ``sql`` (internal APIs, as NoiseStage.measure
    and release chain them); Guard.query on an empty cache is timed by the caller."""
    from guard.noise.release import prepare
    from guard.noise.statistics import statistics_for
    from guard.plan.noisy import noisy_rewrite

    shape, table, info = analyzed(g, sql)
    stage = g.noise
    assert stage is not None
    config = stage.config(table, info)
    wanted = statistics_for(shape, config.average)
    c, m = config.cells_per_unit, config.rows_per_cell

    def plan() -> Any:
        return noisy_rewrite(
            shape, info, wanted, config.bounds, cells_per_unit=c, rows_per_cell=m, salt=stage._salt
        )

    query = plan()
    rows = g.backend.execute(query.query).rows

    def prepared() -> Any:
        return prepare(shape, rows, query.key_slots, query.slots, query.grouping_slot, config, scope=())

    ready = prepared()
    fresh = ready.draw({})
    steps: dict[str, Callable[[], object]] = {
        "front end (parse, validate, analyze)": lambda: analyzed(g, sql),
        "engine (noisy_rewrite + execute)": lambda: g.backend.execute(plan().query),
        "prepare (selections, cache keys)": prepared,
        "draw (samplers)": lambda: ready.draw({}),
        "answer (threshold, rows, notes)": lambda: ready.answer(fresh),
    }
    medians = {}
    for name, fn in steps.items():
        gc.collect()
        medians[name] = bench_core.median_ms(fn, repeat)
    return medians


def breakdowns(g: Guard, latencies: list[Latency], repeat: int) -> dict[str, dict[str, float]]:
    """Stage medians per query; "rest" = the end-to-end median minus the stages (approximate:
    different runs)."""
    print("timing the noise path's stages ...", file=sys.stderr)
    out = {}
    for result in latencies:
        stages = stage_breakdown(g, result.sql, repeat)
        parts = sum(stages.values())
        stages["Guard.query, fresh (median of the rounds)"] = result.median("guard")
        stages["rest of fresh: budget, log + draws written, commit"] = result.median("guard") - parts
        stages["Guard.query, cached"] = result.median("cached")
        stages["rest of cached: log written, commit"] = (
            result.median("cached") - parts + stages["draw (samplers)"]
        )
        stages["raw DuckDB"] = result.median("raw")
        out[result.id] = stages
    return out


def append_costs(repeat: int, cells: int) -> dict[str, float]:
    """Median ms of the state store's commit of an answer (internal API): the log row alone
    (a cached answer) and with a fresh answer's noise write (ledger charge, draws and
    received keys, each key new), for one cell and for ``cells`` cells."""
    from guard.state.records import Draw, LedgerEntry, LogRecord, NoiseWrite, Outcome
    from guard.state.store import StateStore

    record = LogRecord(
        analyst=ANALYST, sql="SELECT COUNT(*) FROM people", decision=Outcome.ANSWERED, rows=[[1]]
    )
    draw = Draw(1.0, Fraction(3), Fraction(1, 3), "geometric")
    counter = iter(range(1, 10**9))

    def noisy(n: int) -> Callable[[], object]:
        def append() -> object:
            sequence = next(counter)
            keys = [f'["v","people","count",null,null,[1,1],{{"cell":{sequence},"i":{i}}}]' for i in range(n)]
            charge = LedgerEntry(sequence, ANALYST, Fraction(1), time.time(), f"log {sequence}")
            write = NoiseWrite("v", "people", charge, dict.fromkeys(keys, draw), keys)
            return store.append(record, noise=write)

        return append

    with tempfile.TemporaryDirectory() as tmp:
        store = StateStore(Path(tmp) / "state")
        try:
            steps = {
                "store.append: log row only (a cached answer)": lambda: store.append(record),
                "store.append: log row + charge + 1 draw (1-cell fresh answer)": noisy(1),
                f"store.append: log row + charge + {cells:,} draws": noisy(cells),
            }
            medians = {}
            for name, fn in steps.items():
                gc.collect()
                medians[name] = bench_core.median_ms(fn, repeat)
        finally:
            store.close()
    return medians


def per_call_us(fn: Callable[[], object], calls: int) -> float:
    """Median over 5 batches of the mean µs per call."""
    fn()
    batches = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        batches.append((time.perf_counter() - started) * 1e6 / calls)
    return statistics.median(batches)


def sampler_speed(calls: int) -> dict[str, float]:
    """µs per call of the samplers a noisy cell needs, with the secure source (the
    default), and of the automatic threshold the answer computes per thresholded row."""
    from guard.noise.mechanisms import ContributionBounds, noisy_count, noisy_sum
    from guard.noise.sampling import InsecureSeededSource
    from guard.noise.statistics import automatic_threshold

    third = Fraction(1, 3)
    income = bench_core.INCOME_BOUNDS
    insecure = InsecureSeededSource(1)
    cases: dict[str, Callable[[], object]] = {
        "noisy_count, ε = 1": lambda: noisy_count(5_000, 1),
        "noisy_count, ε = 1/3": lambda: noisy_count(5_000, third),
        "noisy_sum income [0, 500000], ε = 1": lambda: noisy_sum(2.5e8, income, 1),
        "noisy_sum income [0, 500000], ε = 1/3": lambda: noisy_sum(2.5e8, income, third),
        "noisy_sum hours [0, 80], ε = 1/3": lambda: noisy_sum(1.9e5, bench_core.HOURS_BOUNDS, third),
        "noisy_count, ε = 1/3, InsecureSeededSource (reference)": lambda: noisy_count(
            5_000, third, rng=insecure
        ),
        "automatic_threshold (scale 3, δ = 1e-6)": lambda: automatic_threshold(
            Fraction(3), ContributionBounds(), DELTA
        ),
    }
    return {name: per_call_us(fn, calls) for name, fn in cases.items()}


# --------------------------------------------------------------------------- report


def fmt(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def latency_section(latencies: list[Latency]) -> tuple[list[str], dict[str, float]]:
    rows = [
        [
            r.id,
            str(r.rows),
            fmt(r.median("raw")),
            fmt(r.median("snap") if r.snap_ms else None),
            fmt(r.median("guard")),
            f"**{r.ratio:.2f}**",
            fmt(r.median("cached")),
            fmt(r.cached_ratio),
        ]
        for r in latencies
    ]
    header = ["id", "rows", "raw", "snap", "guard (fresh)", "guard/raw", "guard (cached)", "cached/raw"]
    ratios = [r.ratio for r in latencies]
    cached = [r.cached_ratio for r in latencies]
    overall = {
        "median guard/raw": statistics.median(ratios),
        "geomean guard/raw": bench_core.geomean(ratios),
        "median cached/raw": statistics.median(cached),
        "geomean cached/raw": bench_core.geomean(cached),
        "total raw ms": sum(r.median("raw") for r in latencies),
        "total guard ms": sum(r.median("guard") for r in latencies),
        "total cached ms": sum(r.median("cached") for r in latencies),
    }
    out = ["## Latency per query (median ms)\n", bench_core.markdown_table(header, rows)]
    over = [r.id for r in latencies if r.ratio >= TARGET_RATIO]
    out.append("")
    out.append(bench_core.markdown_table(["measure", "value"], [[k, fmt(v)] for k, v in overall.items()]))
    out.append(f"\nqueries at or above {TARGET_RATIO:g}x raw: {', '.join(over) or 'none'}")
    not_fresh = sum(r.not_fresh for r in latencies)
    not_cached = sum(r.not_cached for r in latencies)
    out.append(
        f"fresh runs that did not spend ε = {EPSILON}: {not_fresh}; repeats that spent ε: {not_cached}"
    )
    return out, overall


def error_section(errors: list[ErrorStats]) -> list[str]:
    rows = [
        [
            e.id,
            str(e.raw_rows),
            f"{e.released_cells:.0f} / {e.cells}",
            fmt(e.hidden_percent, 1),
            f"**{e.mean:.4g}**",
            f"{e.median:.3g}",
            ", ".join(f"{k} {v:.3g}" for k, v in e.by_column.items()),
            str(e.shared_keys),
        ]
        for e in errors
    ]
    header = [
        "id",
        "raw rows",
        "released cells / all",
        "hidden %",
        "mean rel. err",
        "median",
        "per column",
        "shared",
    ]
    return [
        f"\n## Relative error at ε = {EPSILON} per query ({errors[0].draws} draws per query)\n",
        "|noisy - true| / max(|true|, 1) per released cell, true = raw DuckDB; hidden % = GROUP BY rows "
        "the group threshold withheld; shared = cache keys shared with earlier queries of the workload.\n",
        bench_core.markdown_table(header, rows),
    ]


def breakdown_section(stages: dict[str, dict[str, float]]) -> list[str]:
    if not stages:
        return []
    names = list(next(iter(stages.values())))
    short = ["front", "engine", "prepare", "draw", "answer", "fresh", "rest", "cached", "rest c.", "raw"]
    rows = [[qid, *(fmt(s.get(n)) for n in names)] for qid, s in stages.items()]
    legend = "; ".join(f"{a} = {b}" for a, b in zip(short, names, strict=True))
    return [
        "\n## Noise path stages (median ms)\n",
        legend + "\n",
        bench_core.markdown_table(["id", *short], rows),
    ]


def sampler_section(speeds: dict[str, float]) -> list[str]:
    rows = [[name, f"{us:.1f}"] for name, us in speeds.items()]
    return [
        "\n## Samplers (µs per call, secure source unless noted)\n",
        bench_core.markdown_table(["call", "µs"], rows),
    ]


def smartnoise_row(r: Latency, e: ErrorStats, q: dict[str, Any]) -> list[str]:
    if not q.get("supported"):
        return [r.id, fmt(r.ratio), f"{e.mean:.3g}", fmt(e.hidden_percent, 1), "unsupported", *[""] * 6]
    return [
        r.id,
        fmt(r.ratio),
        f"{e.mean:.3g}",
        fmt(e.hidden_percent, 1),
        fmt(q["raw_ms"]),
        fmt(q["smartnoise_ms"], 1),
        fmt(q["smartnoise_ms"] / q["raw_ms"]),
        fmt(q.get("smartnoise_no_reservoir_ms"), 1),
        f"{q['mean_rel_error']:.3g}",
        fmt(q["hidden"] * 100 if q.get("hidden") is not None else None, 1),
        f"{q['mean_rel_error_eps1_per_statistic']:.3g}",
    ]


def smartnoise_summary(pairs: list[tuple[Latency, ErrorStats, dict[str, Any]]]) -> str:
    both = [(r, e, q) for r, e, q in pairs if q.get("supported")]
    if not both:
        return "\nSmartNoise answered none of the queries."
    theirs = [q["smartnoise_ms"] / q["raw_ms"] for _, _, q in both]
    ours = [r.ratio for r, _, _ in both]
    better = sum(e.mean <= q["mean_rel_error"] for _, e, q in both)
    sn_ms = statistics.median(q["smartnoise_ms"] for _, _, q in both)
    return (
        f"\nOn the {len(both)} queries both answer: SmartNoise median {sn_ms:.1f} ms per query, "
        f"SmartNoise/raw median {statistics.median(theirs):.2f} (geomean {bench_core.geomean(theirs):.2f}); "
        f"guard/raw median {statistics.median(ours):.2f} (geomean {bench_core.geomean(ours):.2f}). "
        f"Guard mean relative error <= SmartNoise's (equal ε) on {better} of {len(both)} queries."
    )


def smartnoise_section(path: Path, latencies: list[Latency], errors: list[ErrorStats]) -> list[str]:
    document = json.loads(path.read_text())
    theirs = {q["id"]: q for q in document["queries"]}
    pairs = [(r, e, theirs.get(r.id, {})) for r, e in zip(latencies, errors, strict=True)]
    header = ["id", "guard/raw", "guard err", "guard hidden %", "SN raw ms", "SN ms", "SN/raw"]
    header += ["SN ms, no reservoir", "SN err", "SN hidden %", "SN err, ε = 1 per stat."]
    unsupported = [f"- {q['id']}: {q['error']}" for q in document["queries"] if not q.get("supported")]
    return [
        f"\n## Side by side with SmartNoise SQL {document['environment'].get('smartnoise-sql', '?')}\n",
        f"SmartNoise at equal ε: ε = {EPSILON} per query split equally over its statistics (its own ε is "
        "per statistic; the last column spends ε = 1 on each); its raw DuckDB column is timed in its own "
        f"run ({document['repeat']} timed runs); errors from up to {document['draws']} draws.\n",
        bench_core.markdown_table(header, [smartnoise_row(r, e, q) for r, e, q in pairs]),
        smartnoise_summary(pairs),
        *(["\nNot answered by SmartNoise:", *unsupported] if unsupported else []),
    ]


def issue_comparison(latencies: list[Latency]) -> list[str]:
    guard_ms = statistics.median(r.median("guard") for r in latencies)
    ratio = statistics.median(r.ratio for r in latencies)
    return [
        "\n## Against the issue's SmartNoise numbers (1M rows, DuckDB)\n",
        bench_core.markdown_table(
            ["", "median ms per query", "median ratio to raw"],
            [
                ["SmartNoise SQL 1.0.10 (issue)", f"~{ISSUE_SMARTNOISE['median_ms']:.0f}", "~20"],
                ["guard, noise mode (this run)", fmt(guard_ms), fmt(ratio)],
            ],
        ),
    ]


# --------------------------------------------------------------------------- main


def load_average() -> str:
    """Other work on the machine skews the timings: the report says how busy it was."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows in people (default 1,000,000)")
    parser.add_argument("--rows-per-unit", type=int, default=1, help="rows per person (default 1)")
    parser.add_argument("--cells-per-unit", type=int, default=1, help="contribution c (default 1)")
    parser.add_argument(
        "--rows-per-cell", type=int, default=None, help="contribution m (default: --rows-per-unit)"
    )
    parser.add_argument("--repeat", type=int, default=7, help="timed rounds (default 7)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    parser.add_argument(
        "--draws", type=int, default=30, help="fresh draws per query for the error (default 30)"
    )
    parser.add_argument("--seed", type=int, default=20240601, help="numpy seed of the data")
    parser.add_argument(
        "--sampler-calls", type=int, default=2000, help="calls per sampler batch (default 2000)"
    )
    parser.add_argument("--out", type=Path, default=bench_core.DEFAULT_OUT, help="data folder")
    parser.add_argument("--no-breakdown", action="store_true", help="skip the stage timings")
    parser.add_argument(
        "--workload-only", action="store_true", help="write data, policy and workload JSON, exit"
    )
    parser.add_argument("--smartnoise-results", type=Path, help="JSON from bench_noise_smartnoise.py")
    parser.add_argument("--json", type=Path, help="also write every number as JSON here")
    return parser.parse_args(argv)


@dataclass
class Run:
    """Everything one run measured."""

    env: dict[str, str]
    setup: Setup
    args: argparse.Namespace
    latencies: list[Latency]
    costs: dict[str, float]
    errors: list[ErrorStats]
    stages: dict[str, dict[str, float]]
    speeds: dict[str, float]
    appends: dict[str, float]


def measure(args: argparse.Namespace, env: dict[str, str], setup: Setup) -> Run:
    raw = bench_core.open_raw(setup.data.parquet)
    with tempfile.TemporaryDirectory(prefix="statguard-noise-") as tmp:
        root = Path(tmp)
        print("timing rounds (fresh guard per round):", file=sys.stderr)
        latencies, costs = measure_latency(setup, raw, root, args.warmup, args.repeat)
        g = fresh_guard(setup.policy, root / "template", root / "errors")
        try:
            stages = {} if args.no_breakdown else breakdowns(g, latencies, max(3, args.repeat // 2))
            print(f"measuring errors ({args.draws} draws per query):", file=sys.stderr)
            errors = measure_errors(g, raw, args.draws)
        finally:
            g.close()
    raw.close()
    print("timing samplers and the store ...", file=sys.stderr)
    speeds = sampler_speed(args.sampler_calls)
    appends = {} if args.no_breakdown else append_costs(max(10, args.repeat), 8000)
    env["load average at end (1, 5, 15 min)"] = load_average()
    return Run(env, setup, args, latencies, costs, errors, stages, speeds, appends)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    env = bench_core.environment()
    env["load average at start (1, 5, 15 min)"] = load_average()
    setup = prepare_setup(args)
    print(f"data: {setup.data.parquet}\npolicy: {setup.policy}\nworkload: {setup.workload}", file=sys.stderr)
    if args.workload_only:
        return 0
    try:
        run = measure(args, env, setup)
    except GuardError as error:
        print(f"the guard did not answer a workload query: {error!r}", file=sys.stderr)
        return 2
    print(render(run))
    if args.json:
        write_json(args.json, run)
    ratios = [r.ratio for r in run.latencies]
    median = statistics.median(ratios)
    verdict = "MET" if median < TARGET_RATIO else "NOT MET"
    print(
        f"noise mode: median guard/raw {median:.2f}x, geomean {bench_core.geomean(ratios):.2f}x "
        f"(target < {TARGET_RATIO:g}x: {verdict})",
        file=sys.stderr,
    )
    return 0


def render(run: Run) -> str:
    data, setup, args = run.setup.data, run.setup, run.args
    out = [
        "## Environment\n",
        bench_core.markdown_table(["", ""], [[k, v] for k, v in run.env.items()], right=False),
    ]
    out.append(
        f"\nData: {data.rows:,} rows, {data.units:,} persons ({data.rows_per_unit} row(s) per person), seed "
        f"{data.seed}, sha256 {data.sha256[:16]}…; policy: noise mode, ε = {EPSILON} per query, "
        f"c = {setup.cells_per_unit}, m = {setup.rows_per_cell}, δ = {DELTA:g}; {args.warmup} warm-up + "
        f"{args.repeat} timed rounds, each on a fresh guard."
    )
    out.extend(f"- {k}: {v:.3f}" for k, v in run.costs.items())
    out.append("\n## Queries\n")
    out.extend(f"- {qid}: `{sql}`" for qid, sql in QUERIES)
    out.append("")
    section, _ = latency_section(run.latencies)
    out.extend(section)
    out.extend(error_section(run.errors))
    out.extend(breakdown_section(run.stages))
    out.extend(sampler_section(run.speeds))
    if run.appends:
        out.append("\n## State store: committing an answer (median ms)\n")
        rows = [[name, f"{ms:.2f}"] for name, ms in run.appends.items()]
        out.append(bench_core.markdown_table(["operation", "ms"], rows))
    if args.smartnoise_results:
        out.extend(smartnoise_section(args.smartnoise_results, run.latencies, run.errors))
    out.extend(issue_comparison(run.latencies))
    return "\n".join(out) + "\n"


def write_json(path: Path, run: Run) -> None:
    _, overall = latency_section(run.latencies)
    setup = run.setup
    document = {
        "environment": run.env,
        "data": {k: str(v) for k, v in asdict(setup.data).items()},
        "policy": {"epsilon": EPSILON, "delta": DELTA, "c": setup.cells_per_unit, "m": setup.rows_per_cell},
        "costs": run.costs,
        "latency": [r.summary() for r in run.latencies],
        "latency_runs_ms": {
            r.id: {"raw": r.raw_ms, "guard": r.guard_ms, "cached": r.cached_ms} for r in run.latencies
        },
        "overall": overall,
        "errors": [asdict(e) for e in run.errors],
        "stages_ms": run.stages,
        "samplers_us": run.speeds,
        "store_append_ms": run.appends,
    }
    path.write_text(json.dumps(document, indent=2))


if __name__ == "__main__":
    sys.exit(main())
