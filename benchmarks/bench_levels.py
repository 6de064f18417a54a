"""What logging each sent row's grouping set costs (session 22): CPU and bytes per answer.

An answer of several grouping sets (ROLLUP, CUBE, GROUPING SETS) logs ``levels`` beside
its rows and flags. This times, for a 3-key CUBE answer of ``--rows`` rows (grouping sets
drawn as a CUBE's are, most rows in the finest), what the guard adds (``row_levels``,
the copy ``ProtectedResult`` keeps, ``logged_levels`` and its JSON) against what it
already spent encoding the rows and flags for the log, in CPU time (medians), and the
bytes of each. No engine, no store: the rows are made up.

    python benchmarks/bench_levels.py --rows 1000 10000
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from guard.protection.answer import row_levels
from guard.result import ProtectedResult
from guard.state.records import LogRecord, Outcome
from guard.state.writes import encoded_fields

KEYS = ("region", "sector", "age_band")
MASKS = [tuple(m) for m in itertools.product((False, True), repeat=len(KEYS))]


@dataclass(frozen=True)
class _Shape:
    """The two attributes ``row_levels`` reads of a query shape."""

    group_by: tuple[str, ...]
    levels: tuple[tuple[str, ...], ...]


def _cpu_ms(work: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        gc.collect()
        start = time.process_time()
        work()
        times.append(time.process_time() - start)
    return statistics.median(times) * 1000


def measure(n: int, runs: int) -> str:
    rng = random.Random(n)
    rolled = [MASKS[min(len(MASKS) - 1, int(rng.expovariate(1.5)))] for _ in range(n)]
    rows = [
        [None if up else f"v{rng.randrange(50)}" for up in mask] + [rng.randrange(10**6)] for mask in rolled
    ]
    flags = [["released"] * len(rows[0]) for _ in rows]
    shape = _Shape(KEYS, tuple(tuple(k for k, up in zip(KEYS, m, strict=True) if not up) for m in MASKS))
    result = ProtectedResult([*KEYS, "count"], rows, flags)
    order = list(range(n))

    def levels() -> str:
        found = row_levels(shape, rolled, order)  # type: ignore[arg-type]
        kept = tuple(tuple(level) for level in found or ())  # as ProtectedResult keeps them
        return json.dumps(ProtectedResult.logged_levels(_Levels(kept)))  # type: ignore[arg-type]

    def encoded() -> dict[str, Any]:
        record = LogRecord(
            "a", "q", Outcome.ANSWERED, rows=result.logged_rows(), flags=[list(f) for f in result.flags]
        )
        return encoded_fields(record)

    added, base = _cpu_ms(levels, runs), _cpu_ms(encoded, runs)
    text, plain = levels(), encoded()
    return (
        f"{n:>7,} rows: levels {added:6.2f} ms CPU, {len(text):>9,} bytes | rows+flags encoded "
        f"{base:6.2f} ms CPU, {len(plain['rows']) + len(plain['flags']):>9,} bytes"
    )


@dataclass(frozen=True)
class _Levels:
    levels: tuple[tuple[str, ...], ...]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--runs", type=int, default=15, help="medians of this many runs")
    args = parser.parse_args()
    for n in args.rows:
        print(measure(n, args.runs), flush=True)


if __name__ == "__main__":
    main()
