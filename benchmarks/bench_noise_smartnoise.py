"""SmartNoise SQL on the noise workload of ``bench_noise.py``: latency and error at ε = 1.

Runs in its OWN virtualenv (SmartNoise is never a dependency of this project)::

    python3 -m venv /tmp/snsql
    /tmp/snsql/bin/pip install smartnoise-sql==1.0.10 duckdb pandas pyarrow numpy
    python benchmarks/bench_noise.py --workload-only       # writes the data and the workload JSON
    /tmp/snsql/bin/python benchmarks/bench_noise_smartnoise.py \\
        benchmarks/.data/people-1000000-s20240601-noise-workload.json \\
        --json benchmarks/.data/smartnoise-1m.json
    python benchmarks/bench_noise.py --smartnoise-results benchmarks/.data/smartnoise-1m.json

Same data (the workload's Parquet loaded into an in-memory DuckDB table, as the raw
baseline of ``bench_core.py``), same queries, same bounds (income [0, 500000], hours
[0, 80]) and contribution limit (``max_ids`` = c·m of the guard's policy), δ = 1e-6.

SmartNoise has no DuckDB reader: a small adapter runs its PostgreSQL-dialect SQL on the
DuckDB connection. DuckDB refuses ``ROW_NUMBER() OVER (... ORDER BY RANDOM())`` (a
volatile window ORDER BY), which SmartNoise's per-person reservoir sampling emits, so
the adapter moves ``RANDOM()`` into the inner SELECT as a column and orders by it (the
same random order per person). SmartNoise's grammar reserves ``year``, and with the
column quoted it returns NULL keys and cannot ORDER BY it, so SmartNoise queries a view
``people_sn`` of the same table with ``year`` renamed ``yr`` (the raw baseline keeps the
original table and SQL).

ε: SmartNoise's ``Privacy(epsilon=e)`` is ε per *statistic* (each noisy column,
including the key count it thresholds rows on), so a query with k statistics spends
about k·e. At equal ε with the guard (ε = 1 per query) each statistic gets 1/k (its
default equal split); ``get_privacy_cost`` is reported to check the total. The error
is also measured with ε = 1 per statistic (SmartNoise's own reading of "ε = 1").

Latency: ``PrivateReader.execute`` (parse, rewrite, engine, noise), interleaved with
the same SQL on raw DuckDB; with the default reservoir sampling (``sample_max_ids``)
and without it (valid here: one row per person). Error: the exact aggregates are
computed once, then ``--draws`` noisy releases are drawn from them
(``execute(..., pre_aggregated=...)``, SmartNoise's own API for that); answers with
many rows get fewer draws (``--draw-cells``, at least ``--min-draws``), since SmartNoise
adds noise cell by cell and each draw of the 8,000-row answer takes seconds.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import duckdb
from snsql import Privacy
from snsql.sql.private_reader import PrivateReader
from snsql.sql.reader.postgres import PostgresReader

SCHEMA = "main"
VIEW = "people_sn"
DIMENSIONS = ("region", "sector", "age_band", "sex")
COLUMNS = (*DIMENSIONS, "year", "income", "hours")
#: columns renamed in the view (reserved words of SmartNoise's grammar)
RENAMED = {"year": "yr"}
_WINDOW = "ORDER BY RANDOM ( ) ) AS row_num FROM ( SELECT "
_WINDOW_FIXED = "ORDER BY __random ) AS row_num FROM ( SELECT RANDOM ( ) AS __random, "


class DuckDBReader(PostgresReader):
    """PostgreSQL-dialect SQL from SmartNoise, executed on a DuckDB connection."""

    def __init__(self, conn: duckdb.DuckDBPyConnection, **_: Any) -> None:
        super().__init__(conn=conn)

    def execute(self, query: Any, *ignore: Any, accuracy: bool = False) -> list[tuple[Any, ...]]:
        text = str(query).replace(_WINDOW, _WINDOW_FIXED)
        cursor = self.conn.execute(text)
        if cursor.description is None:
            return []
        return [tuple(d[0] for d in cursor.description), *cursor.fetchall()]


def metadata(workload: dict[str, Any], reservoir: bool) -> dict[str, Any]:
    bounds = workload["bounds"]
    columns: dict[str, Any] = {
        "person_id": {"type": "string", "private_id": True},
        **{d: {"type": "string"} for d in DIMENSIONS},
        RENAMED["year"]: {"type": "int", "lower": 2015, "upper": 2024},
        "income": {"type": "int", "lower": bounds["income"][0], "upper": bounds["income"][1]},
        "hours": {"type": "int", "lower": bounds["hours"][0], "upper": bounds["hours"][1], "nullable": True},
    }
    table = {
        "max_ids": workload["cells_per_unit"] * workload["rows_per_cell"],
        "row_privacy": False,
        "sample_max_ids": reservoir,
        "censor_dims": True,
        "clamp_counts": True,
        "clamp_columns": True,
        **columns,
    }
    return {"Collection": {SCHEMA: {VIEW: table}}}


def adapt(sql: str) -> str:
    """The workload's SQL for SmartNoise: the view, schema-qualified, renamed columns."""
    text = re.sub(r"\bFROM people\b", f"FROM {SCHEMA}.{VIEW}", sql)
    for name, renamed in RENAMED.items():
        text = re.sub(rf"\b{name}\b", renamed, text)
    return text


def open_data(parquet: str) -> duckdb.DuckDBPyConnection:
    """The raw table as bench_core loads it, and SmartNoise's view of it."""
    con = duckdb.connect()
    con.execute(f"CREATE TABLE people AS SELECT * FROM read_parquet('{parquet}')")
    columns = ", ".join(f"{c} AS {RENAMED[c]}" if c in RENAMED else c for c in ("person_id", *COLUMNS))
    con.execute(f"CREATE VIEW {VIEW} AS SELECT {columns} FROM people")
    return con


def reader(
    con: duckdb.DuckDBPyConnection, meta: dict[str, Any], epsilon: float, delta: float
) -> PrivateReader:
    return PrivateReader(DuckDBReader(con), meta, privacy=Privacy(epsilon=epsilon, delta=delta))


def statistics_count(probe: PrivateReader, sql: str) -> int:
    """Noisy statistics SmartNoise draws for ``sql`` (each costs its ε)."""
    return sum(1 for cost in probe._get_mechanism_costs(sql) if cost)


def timed_ms(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000.0


def latency(sides: dict[str, Callable[[], object]], warmup: int, repeat: int) -> dict[str, float]:
    for _ in range(warmup):
        for fn in sides.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(repeat):  # interleaved, so drift hits every side alike
        for name, fn in sides.items():
            times[name].append(timed_ms(fn))
    return {name: statistics.median(t) for name, t in times.items()}


def truth_of(
    con: duckdb.DuckDBPyConnection, sql: str, keys: Sequence[int]
) -> dict[tuple[Any, ...], list[Any]]:
    return {tuple(row[i] for i in keys): list(row) for row in con.execute(sql).fetchall()}


def errors(
    private: PrivateReader,
    sql: str,
    truth: dict[tuple[Any, ...], list[Any]],
    keys: Sequence[int],
    draws: int,
    grouped: bool,
) -> dict[str, float | None]:
    """Mean / median relative error of released cells and share of hidden rows over ``draws``."""
    subquery, _ = private._rewrite(sql)
    exact = private.reader._execute_ast(subquery)
    # the header as SmartNoise names the subquery's columns
    exact = [tuple(s.name for s in subquery._select_symbols), *exact[1:]]
    found: list[float] = []
    hidden: list[float] = []
    for _ in range(draws):
        rows = private.execute(sql, pre_aggregated=exact)[1:]
        for row in rows:
            true_row = truth[tuple(row[i] for i in keys)]
            for i, value in enumerate(row):
                if i in keys:
                    continue
                true = float(true_row[i]) if true_row[i] is not None else 0.0
                found.append(abs(float(value) - true) / max(abs(true), 1.0))
        if grouped:
            hidden.append(1.0 - len(rows) / len(truth))
    return {
        "mean_rel_error": statistics.fmean(found) if found else math.nan,
        "median_rel_error": statistics.median(found) if found else math.nan,
        "hidden": statistics.fmean(hidden) if hidden else None,
    }


def run_query(
    con: duckdb.DuckDBPyConnection, workload: dict[str, Any], query: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    epsilon, delta = workload["epsilon"], workload["delta"]
    sql, unordered, keys = adapt(query["sql"]), adapt(query["unordered"]), query["keys"]
    with_reservoir, without = metadata(workload, True), metadata(workload, False)
    result: dict[str, Any] = {"id": query["id"], "sql": sql}
    try:
        k = statistics_count(reader(con, with_reservoir, epsilon, delta), sql)
        private = reader(con, with_reservoir, epsilon / k, delta)
        private.execute(sql)
    except Exception as error:  # SmartNoise refuses the query: report why
        return result | {"supported": False, "error": f"{type(error).__name__}: {str(error)[:300]}"}
    fast = reader(con, without, epsilon / k, delta)
    spent = private.get_privacy_cost(sql)
    sides: dict[str, Callable[[], object]] = {
        "raw_ms": lambda: con.execute(query["sql"]).fetchall(),
        "smartnoise_ms": lambda: private.execute(sql),
        "smartnoise_no_reservoir_ms": lambda: fast.execute(sql),
    }
    result |= {"supported": True, "statistics": k, "epsilon_per_statistic": epsilon / k}
    result |= {"epsilon_spent": float(spent[0]), "delta_spent": float(spent[1])}
    result |= latency(sides, args.warmup, args.repeat)
    truth = truth_of(con, query["unordered"], keys)
    grouped = " GROUP BY " in unordered.upper()
    # SmartNoise adds noise cell by cell in Python: cap the draws of large answers
    draws = max(args.min_draws, min(args.draws, args.draw_cells // max(len(truth), 1)))
    result["draws"] = draws
    result |= errors(private, unordered, truth, keys, draws, grouped)
    per_statistic = reader(con, with_reservoir, epsilon, delta)
    more = errors(per_statistic, unordered, truth, keys, draws, grouped)
    result |= {f"{name}_eps1_per_statistic": value for name, value in more.items()}
    return result


def environment() -> dict[str, str]:
    return {
        "python": platform.python_version(),
        "duckdb": duckdb.__version__,
        "smartnoise-sql": importlib.metadata.version("smartnoise-sql"),
        "opendp": importlib.metadata.version("opendp"),
        "platform": platform.platform(),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", type=Path, help="the workload JSON written by bench_noise.py")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per query (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs per query (default 1)")
    parser.add_argument("--draws", type=int, default=30, help="noisy releases per query for the error")
    parser.add_argument(
        "--draw-cells",
        type=int,
        default=60_000,
        help="fewer draws when draws x rows exceeds this (default 60,000)",
    )
    parser.add_argument("--min-draws", type=int, default=5, help="draws of the largest answers (default 5)")
    parser.add_argument("--json", type=Path, required=True, help="where to write the results")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    workload = json.loads(args.workload.read_text())
    con = open_data(workload["parquet"])
    results = []
    for query in workload["queries"]:
        result = run_query(con, workload, query, args)
        results.append(result)
        if result["supported"]:
            raw_ms, ours = result["raw_ms"], result["smartnoise_ms"]
            print(
                f"  {result['id']}: raw {raw_ms:8.2f} ms   smartnoise {ours:8.2f} ms   x{ours / raw_ms:6.2f}"
                f"   error {result['mean_rel_error']:.3g}",
                file=sys.stderr,
            )
        else:
            print(f"  {result['id']}: unsupported: {result['error'][:120]}", file=sys.stderr)
    document = {
        "environment": environment(),
        "workload": str(args.workload),
        "rows": workload["rows"],
        "sha256": workload["sha256"],
        "repeat": args.repeat,
        "warmup": args.warmup,
        "draws": args.draws,
        "queries": results,
    }
    args.json.write_text(json.dumps(document, indent=2, default=str))
    supported = [r for r in results if r["supported"]]
    ratios = [r["smartnoise_ms"] / r["raw_ms"] for r in supported]
    if ratios:
        print(
            f"SmartNoise: {len(supported)} of {len(results)} queries; median "
            f"{statistics.median(r['smartnoise_ms'] for r in supported):.1f} ms, median ratio to raw "
            f"{statistics.median(ratios):.2f}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
