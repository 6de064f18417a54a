"""Fuzz the guard: statements through ``Guard.query`` and, optionally, both endpoints.

Reproduce (from the repository root, in the project's virtualenv)::

    python -m benchmarks.fuzz.run --statements 100000                        # in-process
    python -m benchmarks.fuzz.run --statements 100000 --endpoints --per-endpoint 10000
    python -m benchmarks.fuzz.run --statements 2000 --seed 7 --samples 10   # quick look

What it does:

1. In-process: ``Guard.open(policies/students.yaml)`` on a fresh state folder (tempfile),
   then ``--statements`` statements from ``strategies.py`` (in chunks, each family in turn
   at the weights of ``FAMILIES``, each chunk a hypothesis run with its own seed), sent
   as alice and bob in turn, each tagged ``/* fuzz N */``.
2. With ``--endpoints``: ``guard serve`` on free loopback ports (its own fresh state
   folder) and ``--per-endpoint`` statements over HTTP (``POST /query``, bearer token)
   and over PostgreSQL (psycopg 3: simple query protocol, ``PQexecParams`` for
   statements with parameters); the server is stopped with SIGTERM before its store is
   read.
3. Checks, per run: internal errors (in-process: an exception that is not a GuardError, or
   a GuardError of kind InternalError; HTTP: status 500 or a transport error;
   PostgreSQL: SQLSTATE XX000 or a dropped connection); requests without a log row (the
   store's log matched to the requests by their tag; only requests that must reach the
   guard: see ``drivers.py``); messages (errors, notes, notices) containing one of the
   students' names or incomes as a token, unless the statement itself carried it (then
   it is counted as an echo, not a finding).

Markdown report on stdout (a summary table, the outcomes, then every finding with up to
``--samples`` statements as ``repr``, cut); progress on stderr. Exit status 1 on any
finding.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hypothesis import HealthCheck, Phase, given, seed, settings

from benchmarks.fuzz.drivers import HttpDriver, InProcess, PgDriver, Reply, tag
from benchmarks.fuzz.grammar import Fuzzed
from benchmarks.fuzz.schema import POLICIES, Secrets, confidential_tokens, schema, secrets_of
from benchmarks.fuzz.serve import Served
from benchmarks.fuzz.strategies import FAMILIES, hostile, mutated, near_valid, valid
from guard import Guard
from guard.state.store import StateStore

__all__ = ["Tally", "check_log", "drive", "fuzz_in_process", "main"]

POLICY = POLICIES / "students.yaml"
TAG = re.compile(r"/\* fuzz (\d+) \*/")
#: statement numbers of each run start here, so one store can hold several runs
OFFSETS = {"in-process": 0, "http": 10_000_000, "postgresql": 20_000_000}


class Driver(Protocol):
    name: str

    def send(self, number: int, fuzzed: Fuzzed) -> Reply: ...

    def close(self) -> None: ...


@dataclass
class Finding:
    number: int
    fuzzed: Fuzzed
    what: str


@dataclass
class Tally:
    """What one run sent and saw."""

    run: str
    sent: int = 0
    seconds: float = 0.0
    outcomes: Counter[str] = field(default_factory=Counter)
    families: Counter[str] = field(default_factory=Counter)
    #: request number -> (statement, whether it must leave a log row)
    requests: dict[int, tuple[Fuzzed, bool | None]] = field(default_factory=dict)
    internal: list[Finding] = field(default_factory=list)
    leaks: list[Finding] = field(default_factory=list)
    echoes: int = 0
    engine_errors: list[Finding] = field(default_factory=list)
    unlogged: list[Finding] = field(default_factory=list)
    logged_twice: list[Finding] = field(default_factory=list)
    #: logged though the request should not have reached the guard (the prediction's miss)
    unexpected_rows: int = 0
    log_rows: int = 0
    chain: str = ""

    @property
    def rate(self) -> float:
        return self.sent / self.seconds if self.seconds else 0.0

    def record(self, number: int, fuzzed: Fuzzed, reply: Reply, secrets: Secrets, seconds: float) -> None:
        self.sent += 1
        self.seconds += seconds
        self.outcomes[reply.outcome] += 1
        self.families[fuzzed.family] += 1
        self.requests[number] = (fuzzed, reply.expect_log)
        if reply.internal:
            self.internal.append(Finding(number, fuzzed, f"{reply.outcome}: {reply.detail}"))
        if reply.outcome in ("BackendError", "502", "58000"):
            self.engine_errors.append(Finding(number, fuzzed, f"{reply.outcome}: {reply.messages[-1:]}"))
        sent = confidential_tokens(tag(number) + fuzzed.sql + repr(fuzzed.parameters), secrets)
        for message in reply.messages:
            found = confidential_tokens(message, secrets)
            if found - sent:
                self.leaks.append(Finding(number, fuzzed, f"{sorted(found - sent)} in {message[:300]!r}"))
            elif found:
                self.echoes += 1


def interleaved(weights: dict[str, int]) -> list[str]:
    """One cycle of smooth weighted round-robin: each name as often as its weight, spread
    out (valid, near, mutated, valid, hostile, ...), so that short runs see every family."""
    current = dict.fromkeys(weights, 0)
    total = sum(weights.values())
    order = []
    for _ in range(total):
        for name, weight in weights.items():
            current[name] += weight
        chosen = max(current, key=lambda name: current[name])
        current[chosen] -= total
        order.append(chosen)
    return order


def drive(
    driver: Driver,
    count: int,
    base_seed: int,
    first_number: int,
    tally: Tally,
    *,
    chunk: int = 250,
    max_seconds: float = 3600.0,
    progress: Callable[[Tally], None] | None = None,
) -> Tally:
    """Send ``count`` fuzzed statements through ``driver``, numbered from ``first_number``.

    The families take turns in chunks of ``chunk`` statements (a weighted, seeded
    schedule); each chunk is one hypothesis run (generation only, no shrinking: nothing
    fails inside it, findings are recorded) with its own seed."""
    secrets = secrets_of("students")
    sch = schema("students")
    strategies = {
        "valid": valid(sch),
        "near": near_valid(sch),
        "hostile": hostile(sch),
        "mutated": mutated(sch),
    }
    schedule = interleaved(FAMILIES)
    deadline = time.monotonic() + max_seconds
    target = tally.sent + count
    number = first_number
    round_ = 0
    while tally.sent < target and time.monotonic() < deadline:
        family = schedule[round_ % len(schedule)]
        wanted = min(chunk, target - tally.sent)

        @settings(
            max_examples=wanted,
            database=None,
            deadline=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @seed(base_seed * 100_003 + round_)
        @given(strategies[family])
        def one(fuzzed: Fuzzed) -> None:
            nonlocal number
            if tally.sent >= target or time.monotonic() >= deadline:
                return
            started = time.perf_counter()
            reply = driver.send(number, fuzzed)
            tally.record(number, fuzzed, reply, secrets, time.perf_counter() - started)
            number += 1

        one()
        round_ += 1
        if progress is not None:
            progress(tally)
    return tally


def check_log(tally: Tally, rows: Iterable[dict[str, Any]], verify: tuple[int, int | None]) -> None:
    """Match the store's log rows to ``tally``'s requests by their tag."""
    logged: Counter[int] = Counter()
    for row in rows:
        match = TAG.match(row["sql"] or "")
        if match:
            logged[int(match.group(1))] += 1
    for number, (fuzzed, expect) in tally.requests.items():
        rows_of = logged.get(number, 0)
        tally.log_rows += rows_of
        if expect and rows_of == 0:
            tally.unlogged.append(Finding(number, fuzzed, "no log row"))
        elif rows_of > 1:
            tally.logged_twice.append(Finding(number, fuzzed, f"{rows_of} log rows"))
        elif rows_of and expect is False:
            tally.unexpected_rows += 1
    checked, broken = verify
    tally.chain = f"{checked:,} rows verified" if broken is None else f"BROKEN at row {broken} of {checked}"


def fuzz_in_process(count: int, base_seed: int, state: Path, **options: Any) -> Tally:
    """``count`` statements through ``Guard.query`` (students policy, fresh ``state``),
    checked against the log."""
    tally = Tally("in-process")
    with Guard.open(POLICY, state=state) as guard:
        drive(InProcess(guard), count, base_seed, OFFSETS["in-process"], tally, **options)
        check_log(tally, guard.log(), guard.store.verify())
    return tally


def fuzz_endpoints(count: int, base_seed: int, state: Path, **options: Any) -> tuple[list[Tally], int]:
    """``count`` statements over each endpoint of one ``guard serve``; returns the tallies
    and the number of tracebacks in the server's stderr."""
    stderr = state.parent / "serve-stderr.log"
    served = Served(POLICY, state, stderr)
    tallies = []
    try:
        for driver_class in (HttpDriver, PgDriver):
            driver = driver_class(served.urls["http" if driver_class is HttpDriver else "postgresql"])
            tally = Tally(driver.name)
            try:
                drive(driver, count, base_seed, OFFSETS[driver.name], tally, **options)
            finally:
                driver.close()
            tallies.append(tally)
    finally:
        status = served.stop()
    if status != 0:
        print(f"note: guard serve exited with status {status}", file=sys.stderr)
    store = StateStore(state, read_only=True)
    try:
        rows, verify = store.log(), store.verify()
    finally:
        store.close()
    for tally in tallies:
        check_log(tally, rows, verify)
    return tallies, stderr.read_text(errors="replace").count("Traceback")


# --- the report ------------------------------------------------------------------------------


def report(tallies: list[Tally], tracebacks: int | None, samples: int) -> tuple[str, bool]:
    lines = [
        "| run | statements | statements/s | internal errors | requests without a log row "
        "| messages with a confidential value |",
        "|---|---|---|---|---|---|",
    ]
    for t in tallies:
        lines.append(
            f"| {t.run} | {t.sent:,} | {t.rate:,.0f} | {len(t.internal)} | {len(t.unlogged)} "
            f"| {len(t.leaks)} |"
        )
    lines += [
        "",
        "| run | outcomes | families | log rows | hash chain | other |",
        "|---|---|---|---|---|---|",
    ]
    for t in tallies:
        outcomes = ", ".join(f"{k} {v:,}" for k, v in t.outcomes.most_common())
        families = ", ".join(f"{k} {v:,}" for k, v in sorted(t.families.items()))
        other = (
            f"{len(t.engine_errors)} engine errors; {len(t.logged_twice)} logged twice; "
            f"{t.unexpected_rows} logged though not expected; {t.echoes} echoes of the statement's own values"
        )
        lines.append(f"| {t.run} | {outcomes} | {families} | {t.log_rows:,} | {t.chain} | {other} |")
    if tracebacks is not None:
        lines.append(f"\nguard serve's stderr: {tracebacks} tracebacks")
    failed = False
    for t in tallies:
        for title, found, counts in (
            ("internal errors", t.internal, True),
            ("requests without a log row", t.unlogged, True),
            ("messages with a confidential value", t.leaks, True),
            ("logged twice", t.logged_twice, True),
            ("engine errors (not counted as internal)", t.engine_errors, False),
        ):
            if not found:
                continue
            failed = failed or counts
            lines.append(f"\n### {t.run}: {len(found)} {title}\n")
            by_what = defaultdict(list)
            for finding in found:
                by_what[finding.what.split(":")[0]].append(finding)
            for what, group in by_what.items():
                lines.append(f"- {what}: {len(group)}, e.g.")
                for finding in group[:samples]:
                    lines.append(
                        f"  - #{finding.number} ({finding.fuzzed.family}) `{finding.fuzzed.short()}`"
                    )
                    lines.append(f"    {finding.what[:400]!r}")
    return "\n".join(lines), failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--statements", type=int, default=100_000, help="statements through Guard.query")
    parser.add_argument(
        "--endpoints", action="store_true", help="also fuzz guard serve's HTTP and PostgreSQL"
    )
    parser.add_argument("--per-endpoint", type=int, default=10_000, help="statements through each endpoint")
    parser.add_argument("--seed", type=int, default=18, help="base seed of the hypothesis runs")
    parser.add_argument("--chunk", type=int, default=250, help="statements per hypothesis run")
    parser.add_argument("--samples", type=int, default=5, help="statements shown per kind of finding")
    parser.add_argument("--max-seconds", type=float, default=3600.0, help="time bound of each run")
    args = parser.parse_args(argv)

    def progress(t: Tally) -> None:
        print(
            f"  {t.run}: {t.sent:,} sent, {len(t.internal)} internal, {len(t.leaks)} leaks", file=sys.stderr
        )

    options = {"chunk": args.chunk, "max_seconds": args.max_seconds, "progress": progress}
    tallies: list[Tally] = []
    tracebacks = None
    with tempfile.TemporaryDirectory(prefix="statguard-fuzz-") as folder:
        started = time.monotonic()
        if args.statements:
            print(f"in-process: {args.statements:,} statements ...", file=sys.stderr)
            tallies.append(fuzz_in_process(args.statements, args.seed, Path(folder) / "direct", **options))
        if args.endpoints:
            print(f"endpoints: {args.per_endpoint:,} statements each ...", file=sys.stderr)
            served, tracebacks = fuzz_endpoints(
                args.per_endpoint, args.seed, Path(folder) / "served", **options
            )
            tallies += served
    text, failed = report(tallies, tracebacks, args.samples)
    print(f"statguard fuzz: seed {args.seed}, students policy, {time.monotonic() - started:,.0f} s\n")
    print(text)
    print("\nFAILED: see the findings above" if failed else "\nno findings")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
