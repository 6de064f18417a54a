"""First answers against repeats: what an analyst pays the first time a question is asked
in a session, and what the guard pays again for the same question (issue 17).

Reproduce (from the repository root, in the project's virtualenv)::

    python benchmarks/bench_first.py --rows 100000
    python benchmarks/bench_first.py --rows 1000000 --profile /tmp/first.prof

bench_core's table and its twenty queries, asked in order on one fresh state (each
first answer is protected jointly with the answers before it, as in a real session),
each followed at once by the same query again (a repeat: the recorded pattern is
replayed) and by the same SQL on raw DuckDB over the same Parquet file. Printed per
query: first, repeat and raw milliseconds, first / repeat, cells withheld, or the
refusal. Like ``guard serve``, the guard is prepared (``Guard.prepare``: finest cells,
row identities, the rules' verdicts) before the first question, timed apart, and what
is alive then is left out of the garbage collector's full passes
(``guard.server.serve.freeze_start_up``; ``--no-freeze`` skips that, ``--gc`` prints
the collections' milliseconds inside each first answer); ``--cold`` skips the
preparation. The target (issue 17): first at most 3x repeat for every query. One pass:
a first answer cannot be repeated, so these are single timings (run it on a quiet
machine and compare runs, not single queries); the process's CPU milliseconds of each
first answer are printed too (``cpu``: less moved by other processes' load). ``--dump
FILE`` writes every answer (the first and the repeat: its JSON, or the refusal) to
compare two builds' decisions byte for byte; ``--only q13,q18`` prints, times and
profiles only those queries (every query is still asked, in order, since each first
answer is protected jointly with the ones before). Exit status 0 always: this is a
measurement.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import bench_core
from guard import Guard
from guard.errors import GuardError
from guard.server.serve import freeze_start_up


def _timed(call: object) -> tuple[float, object]:
    start = time.perf_counter()
    try:
        out = call()  # type: ignore[operator]
    except GuardError as error:
        out = error
    return (time.perf_counter() - start) * 1000, out


def _shown(answer: object) -> str:
    """One answer as the dump holds it: the refusal's class and message, or its JSON."""
    if isinstance(answer, GuardError):
        return f"{type(answer).__name__}: {answer}"
    return str(answer.to_json())  # type: ignore[attr-defined]


class _Collections:
    """Milliseconds the garbage collector has spent since it was installed."""

    def __init__(self) -> None:
        self.spent = 0.0
        self._started = 0.0

    def observe(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.spent += 1000 * (time.perf_counter() - self._started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000, help="rows in people (default 100,000)")
    parser.add_argument("--seed", type=int, default=20240601, help="numpy seed of the data")
    parser.add_argument("--out", type=Path, default=bench_core.DEFAULT_OUT, help="data folder")
    parser.add_argument(
        "--cold", action="store_true", help="skip Guard.prepare(): the first answer builds the audit state"
    )
    parser.add_argument("--profile", type=Path, help="write a cProfile of the first answers here")
    parser.add_argument("--no-freeze", action="store_true", help="leave start-up objects to the collector")
    parser.add_argument("--gc", action="store_true", help="print collections' ms inside each first answer")
    parser.add_argument("--dump", type=Path, help="write every answer here, to compare runs")
    parser.add_argument("--only", help="comma-separated query ids to time and print (all are still asked)")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else {qid for qid, _ in bench_core.QUERIES}
    dumped: list[str] = []
    data = bench_core.generate(args.out, args.rows, 1, args.seed, 5)
    raw = bench_core.open_raw(data.parquet)
    profile = cProfile.Profile() if args.profile else None
    ratios: list[float] = []
    collector = _Collections()
    if args.gc:
        gc.callbacks.append(collector.observe)
    head = f"{'first ms':>10} {'cpu ms':>8} {'repeat ms':>10} {'raw ms':>8} {'first/rep':>9}"
    print(f"{'query':6} {head}  withheld")
    with tempfile.TemporaryDirectory() as state, Guard.open(data.policy, state=state) as guard:
        if not args.cold:
            started = time.perf_counter()
            guard.prepare()  # what `guard serve` does before it accepts connections
            if not args.no_freeze:
                freeze_start_up()  # and this too
            print(f"start-up: Guard.prepare() {1000 * (time.perf_counter() - started):.0f} ms")
        for qid, sql in bench_core.QUERIES:
            profiled = profile is not None and qid in only
            if profiled:
                profile.enable()  # type: ignore[union-attr]
            collecting = collector.spent
            cpu = time.process_time()
            first, answer = _timed(lambda sql=sql: guard.query(sql, analyst=bench_core.ANALYST))
            cpu = 1000 * (time.process_time() - cpu)
            if profiled:
                profile.disable()  # type: ignore[union-attr]
            repeat, again = _timed(lambda sql=sql: guard.query(sql, analyst=bench_core.ANALYST))
            dumped += [f"{qid} first {_shown(answer)}", f"{qid} repeat {_shown(again)}"]
            if qid not in only:
                continue
            raw_ms, _ = _timed(lambda sql=sql: raw.execute(sql).fetchall())
            if isinstance(answer, GuardError):
                shown = f"refused: {str(answer)[:60]}"
            else:
                flags = [f for row in answer.flags for f in row]  # type: ignore[attr-defined]
                shown = f"{sum(f == 'suppressed' for f in flags)} of {len(flags)}"
            ratio = first / repeat if repeat > 0 else float("inf")
            ratios.append(ratio)
            spent = f"  gc {collector.spent - collecting:.0f} ms" if args.gc else ""
            times = f"{first:10.1f} {cpu:8.1f} {repeat:10.1f} {raw_ms:8.1f} {ratio:9.1f}"
            line = f"{qid:6} {times}  {shown}{spent}"
            print(line, flush=True)
    print(
        f"first / repeat: median {statistics.median(ratios):.1f}, max {max(ratios):.1f}; "
        f"queries within 3x: {sum(r <= 3 for r in ratios)} of {len(ratios)}"
    )
    if args.dump is not None:
        args.dump.write_text("\n".join(dumped) + "\n")
        print(f"answers: {args.dump}")
    if profile is not None:
        profile.dump_stats(str(args.profile))
        print(f"profile of the first answers: {args.profile}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
