"""History-audit harness: decision time per query as the history grows.

Reproduce (from the repository root, in the project's virtualenv)::

    python benchmarks/bench_audit.py                      # 1,000,000 rows, 10,000 queries
    python benchmarks/bench_audit.py --rows 100000 --queries 2000

What it does:

1. Generates (or reuses) bench_core's synthetic ``people`` table: 5 dimensions (region
   50, sector 20, age band 8, sex 2, year 10) and two measures, one row per person.
2. Opens the guard on a fresh state folder with the history audit on (the default,
   linked tables off so that the audit alone decides) and asks ``--queries`` random
   aggregate queries in sequence: SUM(income), COUNT(*) or AVG(hours) with 1-3
   conjunctive conditions (= / IN / <> / BETWEEN) on the dimensions, a third of them
   grouped by one low-cardinality dimension.
3. Times the audit's part of each answer (reading the query sets of its cells from the
   finest-cell table, then the checks and the release) apart from the whole request,
   and prints p50 / p95 / max of both in windows ending at 100, 1,000 and 10,000
   answered queries, with the audit states' rank and memory.

The target (issue 5) is an audit decision p50 <= 20 ms at 10,000 queries on 1M rows.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import AGE_BANDS, FIRST_YEAR, REGIONS, SECTORS, SEXES, YEARS, generate

from guard import Guard
from guard.errors import GuardError

DIMENSIONS: dict[str, tuple[Any, ...]] = {
    "region": REGIONS,
    "sector": SECTORS,
    "age_band": AGE_BANDS,
    "sex": SEXES,
    "year": tuple(range(FIRST_YEAR, FIRST_YEAR + YEARS)),
}
GROUPINGS = ("sex", "age_band", "year")
AGGREGATES = ("SUM(income)", "COUNT(*)", "AVG(hours)")


def _literal(value: Any) -> str:
    return str(value) if isinstance(value, int) else "'" + str(value).replace("'", "''") + "'"


def random_query(rng: np.random.Generator) -> str:
    chosen = rng.choice(list(DIMENSIONS), size=int(rng.integers(1, 4)), replace=False)
    conditions = []
    for name in chosen:
        values = DIMENSIONS[str(name)]
        form = rng.integers(0, 4)
        if form == 0 or len(values) < 4:
            conditions.append(f"{name} = {_literal(values[int(rng.integers(len(values)))])}")
        elif form == 1:
            picked = rng.choice(len(values), size=int(rng.integers(2, 4)), replace=False)
            conditions.append(f"{name} IN ({', '.join(_literal(values[int(i)]) for i in picked)})")
        elif form == 2:
            conditions.append(f"{name} <> {_literal(values[int(rng.integers(len(values)))])}")
        else:
            low = int(rng.integers(0, len(values) - 2))
            conditions.append(f"{name} BETWEEN {_literal(values[low])} AND {_literal(values[low + 2])}")
    aggregate = AGGREGATES[int(rng.integers(len(AGGREGATES)))]
    where = " AND ".join(conditions)
    if rng.random() < 1 / 3:
        by = GROUPINGS[int(rng.integers(len(GROUPINGS)))]
        if by not in chosen:
            return f"SELECT {by}, {aggregate} FROM people WHERE {where} GROUP BY {by}"
    return f"SELECT {aggregate} FROM people WHERE {where}"


def audit_policy(source: Path, target: Path) -> Path:
    document = yaml.safe_load(source.read_text())
    document["protection"]["suppression"] = {"linked": "none"}
    document["protection"]["history"] = {"audit": "exact"}
    for table in document["tables"].values():
        kind, path = next(iter(table["source"].items()))
        table["source"][kind] = str((source.parent / path).resolve())
    target.write_text(yaml.safe_dump(document))
    return target


class Timed:
    """Wraps a method and keeps the time of its last call (ms): wall clock, and the
    calling thread's CPU time (which other processes on a loaded machine move less)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.last = 0.0
        self.last_cpu = 0.0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        started, started_cpu = time.perf_counter(), time.thread_time()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.last = (time.perf_counter() - started) * 1000
            self.last_cpu = (time.thread_time() - started_cpu) * 1000


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--progress", type=int, default=500, help="print a progress line (stderr) every N queries"
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / ".data")
    parser.add_argument(
        "--times",
        type=Path,
        default=None,
        help="also write each query's audit and request ms to this CSV, as it runs",
    )
    args = parser.parse_args()

    data = generate(args.out, args.rows, 1, 20240601, 5)
    checkpoints = sorted({c for c in (100, 1_000, 10_000, args.queries) if c <= args.queries})
    with tempfile.TemporaryDirectory() as tmp:
        policy = audit_policy(data.policy, Path(tmp) / "people-audit.yaml")
        started = time.perf_counter()
        guard = Guard.open(policy, state=Path(tmp) / "state")
        print(f"opened {data.rows:,} rows in {time.perf_counter() - started:.1f} s")
        assert guard.history is not None
        sets, screen = Timed(guard.history.query_sets), Timed(guard.history.screen)
        guard.history.query_sets = sets  # type: ignore[method-assign]
        guard.history.screen = screen  # type: ignore[method-assign]
        rng = np.random.default_rng(args.seed)
        audit_ms: list[float] = []
        total_ms: list[float] = []
        outcomes = {"answered": 0, "withheld some": 0, "refused": 0, "of which over the search budget": 0}
        window_start = 0
        times = args.times.open("w") if args.times else None
        if times:
            print("query,audit_ms,audit_cpu_ms,request_ms,outcome,decision", file=times, flush=True)
        print(
            f"{'window':>13} {'audit p50':>10} {'p95':>8} {'max':>8} {'request p50':>12} {'p95':>8} "
            f"{'rank':>6} {'state MB':>9}"
        )
        for n in range(1, args.queries + 1):
            sql = random_query(rng)
            sets.last = screen.last = sets.last_cpu = screen.last_cpu = 0.0
            began = time.perf_counter()
            try:
                result = guard.query(sql, "alice")
            except GuardError as error:
                outcome = "refused"
                decision = _digest(str(error))
                outcomes["of which over the search budget"] += "did not finish" in str(error)
            else:
                withheld = any("history audit" in note for note in result.notes)
                outcome = "withheld some" if withheld else "answered"
                budget = any("did not finish" in note for note in result.notes)
                outcomes["of which over the search budget"] += budget
                decision = _digest(repr((result.rows, result.flags, result.notes)))
            outcomes[outcome] += 1
            total_ms.append((time.perf_counter() - began) * 1000)
            audit_ms.append(sets.last + screen.last)
            if times:
                cpu = sets.last_cpu + screen.last_cpu
                line = f"{n},{audit_ms[-1]:.3f},{cpu:.3f},{total_ms[-1]:.3f},{outcome},{decision}"
                print(line, file=times, flush=True)
            if n % args.progress == 0:
                recent = audit_ms[-args.progress :]
                rank, memory = _state(guard)
                print(
                    f"  {n:,} queries, {time.perf_counter() - started:,.0f} s; last "
                    f"{args.progress}: audit p50 {statistics.median(recent):.2f} ms, "
                    f"p95 {percentile(recent, 95):.2f} ms, "
                    f"request p50 {statistics.median(total_ms[-args.progress :]):.2f} ms; "
                    f"rank {rank}, state {memory:.1f} MB",
                    file=sys.stderr,
                    flush=True,
                )
            if n in checkpoints:
                window = audit_ms[window_start:]
                requests = total_ms[window_start:]
                rank, memory = _state(guard)
                print(
                    f"{window_start + 1:>6}-{n:<6} {statistics.median(window):>10.2f} "
                    f"{percentile(window, 95):>8.2f} {max(window):>8.2f} "
                    f"{statistics.median(requests):>12.2f} "
                    f"{percentile(requests, 95):>8.2f} {rank:>6} {memory:>9.1f}",
                    flush=True,
                )
                window_start = n
        print("outcomes:", ", ".join(f"{k} {v}" for k, v in outcomes.items()))
        if times:
            times.close()
        guard.close()


def _digest(text: str) -> str:
    """A short digest of an answer (its values, flags and notes) or of a refusal's
    message: two runs on one seed decided alike iff every query's digest is equal."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _state(guard: Guard) -> tuple[int, float]:
    """The audit states' total rank and memory (MB: state plus stored query sets, and
    once per table version the rows' codes its states' boxes are read by)."""
    assert guard.history is not None
    states = guard.history._states.values()
    rank = sum(s.auditor.rank for s in states)
    shared = sum(u.boxes.nbytes() for u in guard.history._universes.values() if u.boxes is not None)
    return rank, (shared + sum(s.auditor.nbytes() + s.auditor.history_nbytes() for s in states)) / 1e6


if __name__ == "__main__":
    main()
