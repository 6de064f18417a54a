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
preparation. ``--only q12`` still asks every query in order but prints (and profiles)
only the named ones; ``--dump FILE`` writes every answer, first and repeat (its flags,
values and notes, one JSON line each) so two runs' decisions can be compared byte for
byte; ``--secret FILE`` gives the state that secret key; the ``cpu ms`` column is the
process's CPU time inside the first answer (every thread), which a loaded machine
disturbs less than the wall clock. The target (issue 17): first at most 3x repeat for
every query. One pass: a first answer cannot be repeated, so these are single timings
(run it on a quiet machine and compare runs, not single queries). Exit status 0 always:
this is a measurement.
"""

from __future__ import annotations

import cProfile
import gc
import json
import os
import shutil
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
    wall, _, out = _timed_cpu(call)
    return wall, out


def _timed_cpu(call: object) -> tuple[float, float, object]:
    """Wall and CPU milliseconds of one call, and its answer (or the GuardError raised)."""
    start, cpu = time.perf_counter(), time.process_time()
    try:
        out = call()  # type: ignore[operator]
    except GuardError as error:
        out = error
    return (time.perf_counter() - start) * 1000, (time.process_time() - cpu) * 1000, out


def _dumped(qid: str, answer: object) -> str:
    """One answer as a JSON line: what was released, withheld and said (or the refusal)."""
    if isinstance(answer, GuardError):
        return json.dumps({"query": qid, "refused": type(answer).__name__, "reason": str(answer)})
    return json.dumps({"query": qid, **json.loads(answer.to_json())})  # type: ignore[attr-defined]


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
    parser = bench_core.data_parser(__doc__, rows=100_000)
    parser.add_argument(
        "--cold", action="store_true", help="skip Guard.prepare(): the first answer builds the audit state"
    )
    parser.add_argument("--profile", type=Path, help="write a cProfile of the first answers here")
    parser.add_argument("--no-freeze", action="store_true", help="leave start-up objects to the collector")
    parser.add_argument("--gc", action="store_true", help="print collections' ms inside each first answer")
    parser.add_argument(
        "--only", nargs="+", metavar="QID", help="print and profile only these queries (all run)"
    )
    parser.add_argument("--dump", type=Path, help="write every answer here (first, repeat), a JSON line each")
    parser.add_argument(
        "--secret", type=Path, help="the state's secret key (default: a fresh one, as a new state has)"
    )
    args = parser.parse_args(argv)
    data = bench_core.generate(args.out, args.rows, 1, args.seed, 5)
    raw = bench_core.open_raw(data.parquet)
    profile = cProfile.Profile() if args.profile else None
    ratios: list[float] = []
    collector = _Collections()
    if args.gc:
        gc.callbacks.append(collector.observe)
    shown_ids = set(args.only) if args.only else {qid for qid, _ in bench_core.QUERIES}
    dump = args.dump.open("w") if args.dump else None
    head = f"{'first ms':>10} {'cpu ms':>10} {'repeat ms':>10} {'raw ms':>8} {'first/rep':>9}"
    print(f"{'query':6} {head}  withheld")
    with tempfile.TemporaryDirectory() as state:
        if args.secret is not None:
            # the same key in two runs: the same cost perturbation (which complementary
            # cells the suppression picks), so two versions' decisions compare cell for cell
            shutil.copyfile(args.secret, Path(state) / "secret.key")
            os.chmod(Path(state) / "secret.key", 0o600)
        with Guard.open(data.policy, state=state) as guard:
            if not args.cold:
                started = time.perf_counter()
                guard.prepare()  # what `guard serve` does before it accepts connections
                if not args.no_freeze:
                    freeze_start_up()  # and this too
                print(f"start-up: Guard.prepare() {1000 * (time.perf_counter() - started):.0f} ms")
            for qid, sql in bench_core.QUERIES:
                profiled = profile is not None and qid in shown_ids
                if profiled:
                    profile.enable()  # type: ignore[union-attr]
                collecting = collector.spent
                first, cpu, answer = _timed_cpu(lambda sql=sql: guard.query(sql, analyst=bench_core.ANALYST))
                if profiled:
                    profile.disable()  # type: ignore[union-attr]
                repeat, again = _timed(lambda sql=sql: guard.query(sql, analyst=bench_core.ANALYST))
                if dump is not None:
                    print(_dumped(qid, answer), file=dump, flush=True)
                    print(_dumped(f"{qid} repeat", again), file=dump, flush=True)
                raw_ms, _ = _timed(lambda sql=sql: raw.execute(sql).fetchall())
                if isinstance(answer, GuardError):
                    shown = f"refused: {str(answer)[:60]}"
                else:
                    flags = [f for row in answer.flags for f in row]  # type: ignore[attr-defined]
                    shown = f"{sum(f == 'suppressed' for f in flags)} of {len(flags)}"
                ratio = first / repeat if repeat > 0 else float("inf")
                if qid not in shown_ids:
                    continue
                ratios.append(ratio)
                spent = f"  gc {collector.spent - collecting:.0f} ms" if args.gc else ""
                times = f"{first:10.1f} {cpu:10.1f} {repeat:10.1f} {raw_ms:8.1f} {ratio:9.1f}"
                line = f"{qid:6} {times}  {shown}{spent}"
                print(line, flush=True)
    if dump is not None:
        dump.close()
    print(
        f"first / repeat: median {statistics.median(ratios):.1f}, max {max(ratios):.1f}; "
        f"queries within 3x: {sum(r <= 3 for r in ratios)} of {len(ratios)}"
    )
    if profile is not None:
        profile.dump_stats(str(args.profile))
        print(f"profile of the first answers: {args.profile}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
