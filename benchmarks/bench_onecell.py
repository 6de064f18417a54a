"""One-cell first answers against their repeats, with the CPU of each stage (issue 17).

Reproduce (from the repository root, in the project's virtualenv)::

    python benchmarks/bench_onecell.py --rows 100000
    python benchmarks/bench_onecell.py --rows 100000 --fresh 4

Default: bench_core's q01-q07 are asked on a fresh, prepared state (as ``guard serve``
does), then many distinct one-cell questions (COUNT by region, SUM of income by region
for women), each asked first and at once again. ``--fresh N`` instead asks q01-q07
themselves, first and repeat, on N fresh states. Printed: the medians of the first
answers and of the repeats (wall and process CPU), then, per stage, the median CPU
of the requesting thread inside the first answers (``time.thread_time``: a loaded
machine disturbs it far less than the wall clock; the history's query-set query runs
on a thread of its own beside the cell query, and DuckDB's own workers are not in it).
Single first answers cannot be repeated, so these are medians over many distinct ones.
Exit status 0 always: this is a measurement.
"""

from __future__ import annotations

import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import guard.core as core
from benchmarks import bench_core
from guard import Guard
from guard.server.serve import freeze_start_up

#: (label, where the stage is called): an attribute of the guard or one of its parts, or
#: (for the protection, a function ``guard.core`` calls) of that module
STAGES: tuple[tuple[str, Callable[[Guard], tuple[object, str]]], ...] = (
    ("front (1-3)", lambda g: (g, "_front")),
    ("cells and query sets (4-5)", lambda g: (g._reader, "grid_beside")),
    ("protection (6a-6b)", lambda g: (core, "protect_with_decision")),
    ("history screen (6c)", lambda g: (g, "_screen")),
    ("commit (7)", lambda g: (g.store, "wait")),
    ("whole answer", lambda g: (g, "_answer")),
)


class _Stages:
    """Thread CPU per stage while ``on``."""

    def __init__(self) -> None:
        self.on = False
        self.spent: dict[str, list[float]] = {}

    def wrap(self, owner: object, name: str, label: str) -> None:
        inner = getattr(owner, name)
        if getattr(inner, "_timed", False):
            return  # a module's function, wrapped for an earlier state already

        @functools.wraps(inner)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return inner(*args, **kwargs)
            finally:
                if self.on:
                    self.spent.setdefault(label, []).append(1000 * (time.thread_time() - start))

        timed._timed = True  # type: ignore[attr-defined]
        setattr(owner, name, timed)


def _asked(
    guard: Guard,
    sql: str,
    stages: _Stages,
    firsts: list[tuple[float, float]],
    repeats: list[tuple[float, float]],
) -> None:
    """``sql`` asked first (its stages timed) and at once again."""
    for out in (firsts, repeats):
        stages.on = out is firsts
        start, cpu = time.perf_counter(), time.process_time()
        guard.query(sql, analyst=bench_core.ANALYST)
        out.append((1000 * (time.perf_counter() - start), 1000 * (time.process_time() - cpu)))
    stages.on = False


def main(argv: list[str] | None = None) -> int:
    parser = bench_core.data_parser(__doc__, rows=100_000)
    parser.add_argument("--count", type=int, default=80, help="distinct one-cell questions (at most 100)")
    parser.add_argument("--fresh", type=int, default=0, help="ask q01-q07 on this many fresh states instead")
    args = parser.parse_args(argv)
    data = bench_core.generate(args.out, args.rows, 1, args.seed, 5)
    stages = _Stages()
    firsts: list[tuple[float, float]] = []
    repeats: list[tuple[float, float]] = []
    asked = [
        sql
        for region in bench_core.REGIONS
        for sql in (
            f"SELECT COUNT(*) FROM people WHERE region = '{region}'",
            f"SELECT SUM(income) FROM people WHERE region = '{region}' AND sex = 'F'",
        )
    ][: args.count]
    for _ in range(max(1, args.fresh)):
        with tempfile.TemporaryDirectory() as state, Guard.open(data.policy, state=state) as guard:
            guard.prepare()
            freeze_start_up()
            for label, target in STAGES:
                stages.wrap(*target(guard), label)
            for _, sql in bench_core.QUERIES[:7]:
                if args.fresh:
                    _asked(guard, sql, stages, firsts, repeats)
                else:
                    guard.query(sql, analyst=bench_core.ANALYST)
            if not args.fresh:
                for sql in asked:
                    _asked(guard, sql, stages, firsts, repeats)

    def median(values: list[tuple[float, float]], i: int) -> float:
        return statistics.median(v[i] for v in values)

    print(
        f"{len(firsts)} first answers: wall {median(firsts, 0):.2f} ms, CPU {median(firsts, 1):.2f} ms; "
        f"repeats: wall {median(repeats, 0):.2f} ms, CPU {median(repeats, 1):.2f} ms; "
        f"first / repeat (wall medians) {median(firsts, 0) / median(repeats, 0):.2f}"
    )
    print("thread CPU of the first answers, medians (ms):")
    for label, _ in STAGES:
        spent = stages.spent.get(label, [])
        if spent:
            print(f"  {label:28} {statistics.median(spent):6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
