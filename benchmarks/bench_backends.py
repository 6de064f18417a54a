"""Back-end harness: the guard against the analyst's SQL run directly on the same engine.

Reproduce (from the repository root, in the project's virtualenv)::

    python -m benchmarks backends --engines duckdb,postgres,spark --rows 1000000
    python -m benchmarks backends --engines duckdb,postgres --rows 10000000 --queries subset
    python -m benchmarks backends --rows 20000 --repeat 3          # smoke run

For every ``--rows`` size and every engine it:

1. generates (or reuses) bench_core's ``people`` Parquet and policy under ``--data``;
2. writes a copy of the policy with a ``backend:`` section (DuckDB; PostgreSQL on a
   throw-away cluster unless ``--pg-dsn`` is given; Spark on ``--spark-master``) and
   times ``Guard.open`` twice on a fresh state folder (first open: snapshot build;
   second: reuse);
3. loads the raw baseline on the same engine: an in-memory DuckDB table; a plain
   PostgreSQL table loaded once with COPY, queried as the owner; a Spark temporary view
   of the Parquet file;
4. runs each query ``--warmup`` times untimed, then ``--repeat`` rounds of raw, the
   guard's cell query alone (``backend.execute`` of the rewritten SQL) and
   ``Guard.query`` (a fresh, logged answer each time), interleaved;
5. checks that every released guard cell equals the raw answer (bench_core.check_answer).

The Markdown report goes to stdout (and ``--out``); progress to stderr. Exit status 1
if an answer differs from raw or the guard failed a query.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: the repository root holds benchmarks/ and tests/
    sys.path.insert(0, str(ROOT))

from benchmarks import bench_core  # noqa: E402
from benchmarks.bench_core import QUERIES, Dataset, geomean, markdown_table, time_ms  # noqa: E402
from guard import Guard, GuardError  # noqa: E402

ENGINES = ("duckdb", "postgres", "spark")
#: ten queries covering every shape (totals, filters, 1-3 dimensions, the 8,000-cell
#: answer, ORDER BY / LIMIT, many aggregates): for engines too slow for all twenty
SUBSET = ("q01", "q02", "q04", "q06", "q08", "q10", "q12", "q14", "q16", "q20")
RAW_SCHEMA = "statguard_raw"
PEOPLE_COLUMNS = (
    "person_id text, region text, sector text, age_band text, sex text, "
    "year smallint, income integer, hours smallint"
)
#: the guard's own Spark session settings (guard/backends/spark_backend.py), so the raw
#: baseline runs with the same shuffle width and ANSI mode
SPARK_SESSION_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.ansi.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
}


_STARTED = time.perf_counter()


def progress(message: str) -> None:
    print(f"[{time.perf_counter() - _STARTED:7.1f} s] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- engines


class Engine:
    """One data engine: the policy's backend section and the raw baseline on it.

    A raw baseline is anything with ``execute(sql)`` returning an object with
    ``fetchall()`` and a DB-API ``description``, as bench_core.check_answer reads it.
    """

    name = ""
    #: what the first Guard.open includes besides the snapshot build
    first_open_note = ""

    def section(self) -> dict[str, Any]:
        raise NotImplementedError

    def open_raw(self, data: Dataset) -> Any:
        raise NotImplementedError

    def close_raw(self, raw: Any) -> None:
        raw.close()

    def version(self) -> str:
        raise NotImplementedError

    def stop(self) -> None:
        """Release what the engine started (a cluster)."""


class DuckDBEngine(Engine):
    name = "duckdb"

    def section(self) -> dict[str, Any]:
        return {"engine": "duckdb"}

    def open_raw(self, data: Dataset) -> Any:
        return bench_core.open_raw(data.parquet)

    def version(self) -> str:
        import duckdb

        return f"DuckDB {duckdb.__version__}"


class PostgresEngine(Engine):
    """A throw-away cluster (tests/backends/pg_server.py), or the server of ``--pg-dsn``."""

    name = "postgres"

    def __init__(self, args: argparse.Namespace, scratch: Path) -> None:
        self._server = None
        if args.pg_dsn:
            self._section = {"engine": "postgres", "dsn": args.pg_dsn, "schema": args.pg_schema}
            if args.pg_owner_dsn:
                self._section["owner_dsn"] = args.pg_owner_dsn
            self._raw_dsn = args.pg_raw_dsn or args.pg_owner_dsn or args.pg_dsn
            self.first_open_note = "may reuse a snapshot of an earlier run in the schema"
        else:
            from tests.backends.pg_server import postgres_available, start_postgres

            reason = postgres_available()
            if reason is not None:
                raise SystemExit(f"--engines postgres: {reason} (or give --pg-dsn)")
            progress("starting a throw-away PostgreSQL cluster ...")
            self._server = start_postgres(scratch / "postgres")
            self._section = self._server.backend_section()
            self._raw_dsn = self._server.dsn("postgres")

    def section(self) -> dict[str, Any]:
        return dict(self._section)

    def _connect(self) -> Any:
        import psycopg

        return psycopg.connect(self._raw_dsn, autocommit=True)

    def open_raw(self, data: Dataset) -> Any:
        """A plain table ``statguard_raw.people`` loaded with COPY from the same data."""
        import duckdb

        con = self._connect()
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {RAW_SCHEMA}")
        con.execute(f"DROP TABLE IF EXISTS {RAW_SCHEMA}.people")
        con.execute(f"CREATE TABLE {RAW_SCHEMA}.people ({PEOPLE_COLUMNS})")
        export = data.parquet.with_suffix(f".{os.getpid()}.csv")
        try:
            duck = duckdb.connect()
            try:
                duck.execute(
                    f"COPY (SELECT * FROM read_parquet('{data.parquet}')) TO '{export}' (HEADER false)"
                )
            finally:
                duck.close()
            with (
                con.cursor().copy(f"COPY {RAW_SCHEMA}.people FROM STDIN (FORMAT csv)") as copy,
                export.open("rb") as handle,
            ):
                while chunk := handle.read(1 << 20):
                    copy.write(chunk)
        finally:
            export.unlink(missing_ok=True)
        con.execute(f"ANALYZE {RAW_SCHEMA}.people")  # as the guard does after its COPY
        con.execute(f"SET search_path = {RAW_SCHEMA}")
        return con

    def close_raw(self, raw: Any) -> None:
        if self._server is None:  # leave nothing behind on someone else's server
            with contextlib.suppress(Exception):
                raw.execute(f"DROP TABLE IF EXISTS {RAW_SCHEMA}.people")
        raw.close()

    def version(self) -> str:
        import psycopg

        with self._connect() as con:
            row = con.execute("SHOW server_version").fetchone()
        return f"PostgreSQL {row[0] if row else '?'} (psycopg {psycopg.__version__})"

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()


@dataclass
class _Fetched:
    description: list[tuple[str]]
    rows: list[tuple[Any, ...]]

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows


class _SparkRaw:
    """The analyst's SQL on a Spark temporary view, with a DB-API-like ``execute``."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark

    def execute(self, sql: str) -> _Fetched:
        frame = self.spark.sql(sql)
        rows = frame.collect()
        return _Fetched([(c,) for c in frame.columns], [tuple(r) for r in rows])

    def close(self) -> None:
        self.spark.catalog.dropTempView("people")


class SparkEngine(Engine):
    name = "spark"

    def __init__(self, args: argparse.Namespace) -> None:
        from tests.backends.spark_session import spark_available

        reason = spark_available()
        if reason is not None:
            raise SystemExit(f"--engines spark: {reason}")
        self._master = args.spark_master
        self._started = False

    @property
    def first_open_note(self) -> str:  # type: ignore[override]
        return "" if self._started else "includes the JVM start"

    def section(self) -> dict[str, Any]:
        return {"engine": "spark", "master": self._master}

    def open_raw(self, data: Dataset) -> Any:
        from pyspark.sql import SparkSession

        # the guard's Guard.open started the JVM: a session of our own in it
        spark = SparkSession.builder.getOrCreate().newSession()
        self._started = True
        for key, value in SPARK_SESSION_CONF.items():
            spark.conf.set(key, value)
        spark.read.parquet(str(data.parquet)).createOrReplaceTempView("people")
        return _SparkRaw(spark)

    def version(self) -> str:
        import pyspark

        return f"Spark {pyspark.__version__}, master {self._master}"


def make_engine(name: str, args: argparse.Namespace, scratch: Path) -> Engine:
    if name == "duckdb":
        return DuckDBEngine()
    if name == "postgres":
        return PostgresEngine(args, scratch)
    return SparkEngine(args)


# --------------------------------------------------------------------------- timing


@dataclass(frozen=True)
class Timing:
    id: str
    raw_ms: float
    guard_ms: float
    #: backend.execute of the guard's rewritten cell query alone (None: internals moved)
    cell_query_ms: float | None
    rows: int
    suppressed: int
    checked: int
    problems: tuple[str, ...]
    error: str | None = None
    #: the first Guard.query of this SQL (a new shape: protection and history audit run
    #: in full; later answers of the same SQL replay the recorded pattern)
    first_ms: float = float("nan")

    @property
    def ratio(self) -> float:
        return self.guard_ms / self.raw_ms


@dataclass(frozen=True)
class EngineRun:
    engine: str
    opens: dict[str, float]  # label -> seconds
    timings: list[Timing]
    #: why the engine could not be measured at all (the guard failed to open, ...)
    error: str | None = None

    @property
    def answered(self) -> list[Timing]:
        return [t for t in self.timings if t.error is None]


def cell_query(g: Guard, sql: str) -> Callable[[], object] | None:
    """The guard's rewritten cell query for ``sql``, run through ``backend.execute`` as
    Guard._protected runs it (internal APIs: None if they moved)."""
    try:
        from guard.plan.rewrite import rewrite
        from guard.protection.sums import with_sums
        from guard.query.analyze import analyze
        from guard.query.parse import parse
        from guard.query.validate import validate

        policy, backend = g.policy, g.backend
        select, table = validate(parse(sql, policy.limits), bench_core.visible_tables(g))
        info = backend.table_info(table.name)
        shape = with_sums(analyze(select, table, info.types, policy.limits))
        plan = rewrite(shape, info, bench_core.guard_depth(g), backend.capabilities)
    except Exception as error:
        progress(f"  cell query unavailable: {error!r}")
        return None
    return lambda: backend.execute(plan.query)


def time_query(g: Guard, raw: Any, qid: str, sql: str, warmup: int, repeat: int) -> Timing:
    def run_raw() -> object:
        return raw.execute(sql).fetchall()

    def run_guard() -> object:
        return g.query(sql, analyst=bench_core.ANALYST)

    run_cells = cell_query(g, sql)
    try:
        first_ms = time_ms(run_guard)
        for _ in range(warmup):
            run_raw()
            if run_cells is not None:
                run_cells()
            run_guard()
        raw_times, cell_times, guard_times = [], [], []
        with bench_core.collected():
            for _ in range(repeat):  # interleaved, so drift hits every side alike
                raw_times.append(time_ms(run_raw))
                if run_cells is not None:
                    cell_times.append(time_ms(run_cells))
                guard_times.append(time_ms(run_guard))
        answer = g.query(sql, analyst=bench_core.ANALYST)
    except GuardError as error:
        return Timing(qid, float("nan"), float("nan"), None, 0, 0, 0, (), f"{type(error).__name__}: {error}")
    try:
        checked, problems = bench_core.check_answer(raw, sql, answer)
    except Exception as error:
        checked, problems = 0, [f"check failed: {error!r}"]
    suppressed = sum(f == "suppressed" for row in answer.flags for f in row)
    return Timing(
        qid,
        statistics.median(raw_times),
        statistics.median(guard_times),
        statistics.median(cell_times) if cell_times else None,
        len(answer.rows),
        suppressed,
        checked,
        tuple(problems),
        first_ms=first_ms,
    )


def policy_copy(data: Dataset, section: dict[str, Any], folder: Path, engine: str) -> Path:
    """bench_core's policy with an absolute source path and ``section`` as ``backend:``."""
    document = yaml.safe_load(data.policy.read_text())
    document["tables"]["people"]["source"] = {"parquet": str(data.parquet)}
    document["backend"] = section
    path = folder / f"{data.policy.stem}-{engine}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def run_engine(engine: Engine, data: Dataset, queries: Sequence[tuple[str, str]], args: Any) -> EngineRun:
    note = engine.first_open_note
    with tempfile.TemporaryDirectory(prefix=f"statguard-bench-{engine.name}-") as scratch:
        policy = policy_copy(data, engine.section(), Path(scratch), engine.name)
        state = Path(scratch) / "state"
        opens: dict[str, float] = {}
        progress(f"[{engine.name}] first Guard.open (builds the snapshot) ...")
        started = time.perf_counter()
        Guard.open(policy, state=state, backend=engine.name).close()
        opens["first open" + (f" ({note})" if note else "")] = time.perf_counter() - started
        started = time.perf_counter()
        g = Guard.open(policy, state=state, backend=engine.name)
        opens["second open"] = time.perf_counter() - started
        try:
            progress(f"[{engine.name}] loading the raw baseline ...")
            started = time.perf_counter()
            raw = engine.open_raw(data)
            opens["raw baseline load"] = time.perf_counter() - started
            progress("  " + ", ".join(f"{k} {v:.2f} s" for k, v in opens.items()))
            try:
                timings = []
                for qid, sql in queries:
                    t = time_query(g, raw, qid, sql, args.warmup, args.repeat)
                    timings.append(t)
                    if t.error:
                        progress(f"  {qid}: GUARD FAILED: {t.error}")
                    else:
                        cells = "" if t.cell_query_ms is None else f"cell query {t.cell_query_ms:9.2f}   "
                        progress(
                            f"  {qid}: raw {t.raw_ms:9.2f} ms   {cells}guard {t.guard_ms:9.2f} ms   "
                            f"x{t.ratio:5.2f}" + ("   MISMATCH" if t.problems else "")
                        )
            finally:
                engine.close_raw(raw)
        finally:
            g.close()
    return EngineRun(engine.name, opens, timings)


def measure(engine: Engine, data: Dataset, queries: Sequence[tuple[str, str]], args: Any) -> EngineRun:
    """run_engine, or the reason it failed: one broken engine does not lose the others."""
    try:
        return run_engine(engine, data, queries, args)
    except Exception as error:
        progress(f"[{engine.name}] FAILED: {error!r}")
        return EngineRun(engine.name, {}, [], f"{type(error).__name__}: {error}")


# --------------------------------------------------------------------------- report


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.1f}" if value >= 100 else f"{value:.2f}"


def report(data: Dataset, runs: list[EngineRun], queries: Sequence[tuple[str, str]], args: Any) -> str:
    out = [f"## {data.rows:,} rows\n"]
    out.append(
        f"Data: {data.rows:,} rows, seed {data.seed}, {data.parquet.stat().st_size / 1e6:.1f} MB Parquet "
        f"(sha256 {data.sha256[:16]}…). Median of {args.repeat} interleaved runs after {args.warmup} "
        "warm-up runs; every guard run is a fresh, logged `Guard.query`."
    )
    failed = [r for r in runs if r.error]
    runs = [r for r in runs if not r.error]
    out.extend(f"\n**{r.engine} failed**: {r.error}" for r in failed)
    out.append("\n### Guard.open and raw load (seconds)\n")
    rows = [[r.engine, "; ".join(f"{k} {v:.2f}" for k, v in r.opens.items())] for r in runs]
    out.append(markdown_table(["engine", "seconds"], rows, right=False))

    out.append("\n### Per query: median ms, guard/raw on the same engine\n")
    out.append(
        "x = guard/raw; 1st = the first `Guard.query` of the SQL in this state (not in the median: "
        "a new shape runs protection and the history audit in full, a repeat replays its pattern).\n"
    )
    header = ["id"]
    for r in runs:
        header += [f"{r.engine} raw", f"{r.engine} guard", f"{r.engine} x", f"{r.engine} 1st"]
    header.append("check")
    by_id = [{t.id: t for t in r.timings} for r in runs]
    rows = []
    for qid, _ in queries:
        row, problems = [qid], 0
        for timings in by_id:
            t = timings[qid]
            if t.error:
                row += ["n/a", "FAILED", "n/a", "n/a"]
                problems += 1
            else:
                row += [_ms(t.raw_ms), _ms(t.guard_ms), f"**{t.ratio:.2f}**", _ms(t.first_ms)]
                problems += len(t.problems)
        row.append("ok" if not problems else f"{problems} problem(s)")
        rows.append(row)
    out.append(markdown_table(header, rows))

    out.append("\n### Per engine\n")
    out.append(
        "cell query = `backend.execute` of the guard's rewritten SQL alone (the engine's share "
        "of `Guard.query`); the rest is the guard's Python (parse .. protect, history audit, log).\n"
    )
    rows = []
    for r in runs:
        done = r.answered
        if not done:
            rows.append([r.engine, "0", *(["n/a"] * 9)])
            continue
        ratios = [t.ratio for t in done]
        raw_sum, guard_sum = sum(t.raw_ms for t in done), sum(t.guard_ms for t in done)
        cells = [t.cell_query_ms for t in done if t.cell_query_ms is not None]
        cell_sum = sum(cells) if len(cells) == len(done) else None
        rows.append(
            [
                r.engine,
                f"{len(done)}/{len(r.timings)}",
                f"{statistics.median(ratios):.2f}",
                f"**{geomean(ratios):.2f}**",
                f"{min(ratios):.2f} / {max(ratios):.2f}",
                f"{raw_sum:,.0f}",
                _ms(cell_sum),
                f"{guard_sum:,.0f}",
                f"{sum(t.first_ms for t in done):,.0f}",
                "n/a" if cell_sum is None else f"{cell_sum / guard_sum:.0%}",
                f"{sum(t.checked for t in done):,} / {sum(len(t.problems) for t in r.timings)}",
            ]
        )
    header = ["engine", "answered", "median x", "geomean x", "min / max x", "sum raw ms"]
    header += [
        "sum cell query ms",
        "sum guard ms",
        "sum 1st ms",
        "cell query share",
        "cells checked / problems",
    ]
    out.append(markdown_table(header, rows))
    for r in runs:
        for t in r.timings:
            if t.error:
                out.append(f"- {r.engine} {t.id}: the guard failed: {t.error}")
            for problem in t.problems[:5]:
                out.append(f"- {r.engine} {t.id}: {problem}")
    return "\n".join(out) + "\n"


def header(args: Any, versions: dict[str, str], queries: Sequence[tuple[str, str]]) -> str:
    env = bench_core.environment()
    env["load average (1, 5, 15 min)"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    env.update(versions)
    out = ["# Back-ends: the guard against raw SQL on the same engine\n"]
    out.append("`" + " ".join(["python -m benchmarks backends", *args.argv]) + "`\n")
    out.append(markdown_table(["", ""], [[k, v] for k, v in env.items()], right=False))
    out.append(
        "\nQueries (bench_core.QUERIES" + (")" if len(queries) == len(QUERIES) else ", a subset)") + ":\n"
    )
    out.extend(f"- {qid}: `{sql}`" for qid, sql in queries)
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- main


def select_queries(spec: str) -> list[tuple[str, str]]:
    if spec == "all":
        return list(QUERIES)
    wanted = SUBSET if spec == "subset" else tuple(q.strip() for q in spec.split(","))
    known = dict(QUERIES)
    unknown = [q for q in wanted if q not in known]
    if unknown:
        raise SystemExit(f"--queries: unknown {', '.join(unknown)}; known: all, subset, {', '.join(known)}")
    return [(q, known[q]) for q in wanted]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engines", default="duckdb,postgres,spark", help="comma-separated: " + ", ".join(ENGINES)
    )
    parser.add_argument(
        "--rows",
        type=int,
        action="append",
        help="rows of the people table; repeat for several (default 1,000,000)",
    )
    parser.add_argument("--repeat", type=int, default=7, help="timed runs per query and side (default 7)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs per query and side (default 2)")
    parser.add_argument(
        "--queries", default="all", help=f"all (20), subset ({','.join(SUBSET)}), or ids: q01,q08"
    )
    add_engine_arguments(parser)
    parser.add_argument("--pg-raw-dsn", help="the role of the raw baseline (default: --pg-owner-dsn)")


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """The data, report and engine options every back-end harness shares."""
    parser.add_argument("--seed", type=int, default=20240601, help="numpy seed of the data (bench_core's)")
    parser.add_argument(
        "--data", type=Path, default=bench_core.DEFAULT_OUT, help="data folder (benchmarks/.data)"
    )
    parser.add_argument("--out", type=Path, help="also write the Markdown report here")
    parser.add_argument(
        "--pg-dsn", help="the guard's query role on an existing server (default: a throw-away cluster)"
    )
    parser.add_argument("--pg-owner-dsn", help="the role that builds the snapshots (with --pg-dsn)")
    parser.add_argument(
        "--pg-schema", default="statguard", help="the guard's snapshot schema (with --pg-dsn)"
    )
    parser.add_argument("--spark-master", default="local[2]", help="Spark master (default local[2])")


def run(args: argparse.Namespace) -> int:
    names = [n.strip() for n in args.engines.split(",") if n.strip()]
    unknown = [n for n in names if n not in ENGINES]
    if unknown or not names:
        raise SystemExit(f"--engines: unknown {', '.join(unknown) or '(none)'}; known: {', '.join(ENGINES)}")
    queries = select_queries(args.queries)
    sizes = args.rows or [1_000_000]
    failed = False
    with contextlib.ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="statguard-bench-backends-")))
        engines = []
        for name in names:
            engine = make_engine(name, args, scratch)
            stack.callback(engine.stop)
            engines.append(engine)
        sections = []
        for rows in sizes:
            data = bench_core.generate(args.data.resolve(), rows, 1, args.seed, 5)
            progress(f"data: {data.parquet}")
            runs = [measure(engine, data, queries, args) for engine in engines]
            sections.append(report(data, runs, queries, args))
            failed |= any(r.error or t.error or t.problems for r in runs for t in r.timings)
            for r in runs:
                done = r.answered
                if done:
                    ratios = [t.ratio for t in done]
                    progress(
                        f"{rows:,} rows, {r.engine}: guard/raw geomean {geomean(ratios):.2f}, "
                        f"median {statistics.median(ratios):.2f}"
                    )
        versions = {f"engine: {e.name}": e.version() for e in engines}
    text = header(args, versions, queries) + "\n" + "\n".join(sections)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        progress(f"report written to {args.out}")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks backends", description=__doc__.split("\n\n")[0]
    )
    add_arguments(parser)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = argv
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
