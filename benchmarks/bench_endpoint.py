"""Endpoint load test: 16 concurrent clients over HTTP and the PostgreSQL protocol, then a
consistency check of what the guard recorded, and the cost against the library itself.

Reproduce (from the repository root, in the project's virtualenv)::

    python benchmarks/bench_endpoint.py                    # 10,000 queries, 16 clients
    python benchmarks/bench_endpoint.py --queries 2000     # quick look
    python benchmarks/bench_endpoint.py --endpoints http --policies students

What it does, for each policy (``students``: cell suppression; ``hospital-dp``: noise and
privacy budgets), on a fresh state folder:

1. Starts ``guard serve --http-port 0 --pg-port 0`` as a subprocess on 127.0.0.1 (the
   clients and the server do not share a GIL).
2. For each endpoint, ``--clients`` threads each with their own connection (half as
   alice, half as bob) send a share of the policy's queries: a fixed mix of answered,
   refused and rejected shapes, each tagged ``/* request N */`` so the log can be
   matched request by request. Stops after its count or ``--max-seconds``.
3. Stops the server (SIGTERM), opens the state store and checks: no transport error,
   every request's outcome allowed for its query, every request exactly once in the log
   with the decision the client saw, the log's hash chain intact, and no privacy budget
   account spent beyond its limit.
4. Runs the same mix through ``Guard.query`` from as many threads in-process (its own
   fresh state folder): the baseline of the ratio.

Queries/s, p50/p99 latency and the server process's CPU (user + system) per request
are printed per endpoint as a Markdown table (stdout);
progress on stderr. Exit status 1 if any check failed. Loopback only; nothing is left
running (the server is killed if it does not stop within 30 s).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import httpx

from guard import Guard, GuardError

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ROOT / "policies"
PASSWORDS = {"alice": "alice-demo", "bob": "bob-demo"}
#: seconds the server may take to start or to stop
STARTUP = STOP = 30

#: (query, outcomes it may get); "{i}" makes a query new each time (a fresh noise charge)
MIXES: dict[str, list[tuple[str, frozenset[str]]]] = {
    "students": [
        ("SELECT major, SUM(income) FROM students GROUP BY major", frozenset({"answered"})),
        ("SELECT COUNT(*) FROM students", frozenset({"answered"})),
        (
            "SELECT sex, major, COUNT(*), AVG(income) FROM students GROUP BY sex, major",
            frozenset({"answered"}),
        ),
        (
            "SELECT class, SUM(income) FROM students WHERE major = 'CS' GROUP BY class",
            frozenset({"answered"}),
        ),
        ("SELECT SUM(income) FROM students WHERE sex = 'Female' AND major = 'EE'", frozenset({"refused"})),
        ("SELECT name FROM students", frozenset({"rejected"})),
        ("SELECT * FROM students", frozenset({"rejected"})),
    ],
    "hospital-dp": [
        ("SELECT town, COUNT(*) FROM hospital GROUP BY town", frozenset({"answered", "refused"})),
        ("SELECT AVG(income) FROM hospital WHERE town = 'Enfield'", frozenset({"answered", "refused"})),
        (
            "SELECT COUNT(*) FROM hospital WHERE town IN ('Enfield', 'T{i}')",
            frozenset({"answered", "refused"}),
        ),
        ("SELECT COUNT(*) FROM hospital", frozenset({"answered", "refused"})),
        ("SELECT patient_id FROM hospital", frozenset({"rejected"})),
    ],
}
#: what the log says for each outcome a client sees
DECISIONS = {"answered": "answered", "refused": "refused", "rejected": "rejected"}
HTTP_OUTCOMES = {200: "answered", 400: "rejected", 403: "refused", 429: "refused"}
DIRECT_OUTCOMES = {"QueryRejected": "rejected", "QueryRefused": "refused", "BudgetExhausted": "refused"}
PG_OUTCOMES = {"42000": "rejected", "42501": "refused", "53400": "refused"}
TAG = re.compile(r"/\* request (\d+) \*/")


@dataclass
class Run:
    """What one endpoint's clients saw."""

    endpoint: str
    outcomes: dict[int, tuple[int, str]] = field(default_factory=dict)  # request -> (mix index, outcome)
    latencies: list[float] = field(default_factory=list)
    transport_errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: CPU seconds (user + system) the server process spent during the run (None: unknown)
    server_cpu: float | None = None

    @property
    def rate(self) -> float:
        return len(self.outcomes) / self.seconds if self.seconds else 0.0

    @property
    def cpu_per_request(self) -> str:
        """The server's CPU milliseconds per request, as a table cell."""
        if self.server_cpu is None or not self.outcomes:
            return "-"
        return f"{self.server_cpu * 1000 / len(self.outcomes):.2f}"

    def percentile(self, p: float) -> float:
        if len(self.latencies) < 2:
            return self.latencies[0] * 1000 if self.latencies else float("nan")
        return statistics.quantiles(self.latencies, n=100, method="inclusive")[int(p) - 1] * 1000


#: one client: sends (request number, SQL) and returns the outcome, or raises on transport errors
Send = Callable[[int, str], str]


def load(
    endpoint: str,
    mix: list[tuple[str, frozenset[str]]],
    numbers: range,
    clients: int,
    max_seconds: float,
    connect: Callable[[str], tuple[Send, Callable[[], None]]],
) -> Run:
    """``clients`` threads, each connected as alice or bob, share ``numbers`` until done
    or ``max_seconds`` passed."""
    run = Run(endpoint)
    work = iter(numbers)
    lock = threading.Lock()
    deadline = time.monotonic() + max_seconds

    def client(number: int) -> None:
        try:
            send, close = connect("alice" if number % 2 else "bob")
        except Exception as exc:
            with lock:
                run.transport_errors.append(f"connect: {type(exc).__name__}: {exc}")
            return
        try:
            while time.monotonic() < deadline:
                with lock:
                    request = next(work, None)
                if request is None:
                    return
                index = request % len(mix)
                sql = f"{mix[index][0].format(i=request)} /* request {request} */"
                started = time.perf_counter()
                try:
                    outcome = send(request, sql)
                except Exception as exc:  # a transport error: counted, and the run goes on
                    with lock:
                        run.transport_errors.append(f"request {request}: {type(exc).__name__}: {exc}")
                    continue
                elapsed = time.perf_counter() - started
                with lock:
                    run.outcomes[request] = (index, outcome)
                    run.latencies.append(elapsed)
        finally:
            close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    run.seconds = time.perf_counter() - started
    return run


def http_client(url: str) -> Callable[[str], tuple[Send, Callable[[], None]]]:
    def connect(analyst: str) -> tuple[Send, Callable[[], None]]:
        client = httpx.Client(
            base_url=url, timeout=60, headers={"Authorization": f"Bearer {PASSWORDS[analyst]}"}
        )

        def send(_: int, sql: str) -> str:
            response = client.post("/query", json={"sql": sql})
            if response.status_code not in HTTP_OUTCOMES:
                raise RuntimeError(f"HTTP {response.status_code}: {response.text[:200]}")
            return HTTP_OUTCOMES[response.status_code]

        return send, client.close

    return connect


def pg_client(url: str) -> Callable[[str], tuple[Send, Callable[[], None]]]:
    import psycopg

    host_port = url.split("://", 1)[1].split("/", 1)[0]
    host, _, port = host_port.rpartition(":")
    dbname = url.rsplit("/", 1)[1]

    def connect(analyst: str) -> tuple[Send, Callable[[], None]]:
        connection = psycopg.connect(
            host=host.strip("[]"),
            port=int(port),
            user=analyst,
            password=PASSWORDS[analyst],
            dbname=dbname,
            sslmode="disable",  # loopback
            autocommit=True,
            connect_timeout=30,
        )

        def send(_: int, sql: str) -> str:
            try:
                with connection.cursor() as cursor:
                    cursor.execute(sql)
                    cursor.fetchall()
            except psycopg.errors.Error as exc:
                if exc.sqlstate in PG_OUTCOMES:
                    return PG_OUTCOMES[exc.sqlstate]
                raise
            return "answered"

        return send, connection.close

    return connect


def direct_client(guard: Guard) -> Callable[[str], tuple[Send, Callable[[], None]]]:
    """``Guard.query`` itself, in this process: the baseline."""

    def connect(analyst: str) -> tuple[Send, Callable[[], None]]:
        def send(_: int, sql: str) -> str:
            try:
                guard.query(sql, analyst=analyst)
            except GuardError as exc:
                if exc.kind not in DIRECT_OUTCOMES:
                    raise
                return DIRECT_OUTCOMES[exc.kind]
            return "answered"

        return send, lambda: None

    return connect


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of process ``pid`` and all its threads so far (Linux
    ``/proc``; None elsewhere). Load from other processes moves it less than queries/s."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def server(policy: Path, state: Path, pg: bool) -> Iterator[tuple[dict[str, str], int]]:
    """``guard serve`` on free loopback ports; yields its URLs by endpoint, and its pid."""
    command = [sys.executable, "-c", "from guard.cli.main import main; main()", "serve"]
    command += ["--policy", str(policy), "--state", str(state), "--host", "127.0.0.1", "--http-port", "0"]
    command += ["--pg-port", "0"] if pg else ["--no-pg"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        urls: dict[str, str] = {}
        assert process.stdout is not None
        deadline = time.monotonic() + STARTUP
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line or line.startswith("Ctrl-C"):
                break
            if match := re.match(r"\s+(HTTP|PostgreSQL)\s+(\S+)", line):
                urls[match.group(1).lower()] = match.group(2)
        if not urls:
            raise SystemExit(f"guard serve did not start: {process.stderr.read() if process.stderr else ''}")
        yield urls, process.pid
        process.send_signal(signal.SIGTERM)
        process.wait(STOP)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(STOP)


def check(policy: Path, state: Path, runs: list[Run], mix: list[tuple[str, frozenset[str]]]) -> list[str]:
    """What went wrong, in words (empty: every check passed)."""
    problems = []
    for run in runs:
        if run.transport_errors:
            first = run.transport_errors[0]
            problems.append(f"{run.endpoint}: {len(run.transport_errors)} transport errors, e.g. {first}")
        wrong = [(n, o) for n, (i, o) in run.outcomes.items() if o not in mix[i][1]]
        if wrong:
            problems.append(f"{run.endpoint}: {len(wrong)} unexpected outcomes, e.g. request {wrong[0]}")
    seen = {n: outcome for run in runs for n, (_, outcome) in run.outcomes.items()}
    sent = sum(len(run.outcomes) + len(run.transport_errors) for run in runs)
    with Guard.open(policy, state=state) as guard:
        log = guard.log()
        if len(log) != sent:
            problems.append(f"{len(log)} log records for {sent} requests sent")
        tags = Counter(int(m.group(1)) if (m := TAG.search(r["sql"])) else -1 for r in log)
        twice = [n for n, c in tags.items() if c > 1]
        missing = set(seen) - set(tags)
        if twice or missing:
            problems.append(f"logged more than once: {twice[:5]}; never logged: {sorted(missing)[:5]}")
        decisions = {int(m.group(1)): r["decision"] for r in log if (m := TAG.search(r["sql"]))}
        mismatched = [n for n, o in seen.items() if decisions.get(n) != DECISIONS[o]]
        if mismatched:
            problems.append(f"{len(mismatched)} requests logged with another decision than the client saw")
        checked, broken = guard.store.verify()
        if broken is not None:
            problems.append(f"hash chain broken at record {broken} of {checked}")
        if guard.noise is not None:
            for account in guard.budget()["accounts"]:
                limit = account["limit"]
                if limit is not None and Fraction(account["spent"]["exact"]) > Fraction(limit["exact"]):
                    problems.append(
                        f"{account['account']} overspent: {account['spent']['exact']} > {limit['exact']}"
                    )
    return problems


def summary(run: Run) -> str:
    counts = Counter(outcome for _, outcome in run.outcomes.values())
    mix = ", ".join(f"{counts[k]} {k}" for k in ("answered", "refused", "rejected"))
    return (
        f"{run.rate:,.0f} | {run.percentile(50):.1f} | {run.percentile(99):.1f} | "
        f"{run.cpu_per_request} | {mix}"
    )


def bench_policy(
    name: str, endpoints: list[str], per_run: int, args: argparse.Namespace
) -> tuple[list[str], list[str]]:
    """Load one policy's server over each endpoint, check its store, and run the baseline;
    returns the table rows and the problems found."""
    policy, mix = POLICIES / f"{name}.yaml", MIXES[name]
    taken = 0  # request numbers are unique across every run on this store

    def take(count: int) -> range:
        nonlocal taken
        taken += count
        return range(taken - count, taken)

    with tempfile.TemporaryDirectory(prefix="bench-endpoint-") as folder:
        state, baseline = Path(folder) / "served", Path(folder) / "direct"
        checked: list[Run] = []
        timed: list[Run] = []
        with server(policy, state, pg="pg" in endpoints) as (urls, pid):
            for endpoint in endpoints:
                connect = http_client(urls["http"]) if endpoint == "http" else pg_client(urls["postgresql"])
                print(f"{name}: {args.warmup} + {per_run} requests over {endpoint} ...", file=sys.stderr)
                if args.warmup:
                    checked.append(
                        load(endpoint, mix, take(args.warmup), args.clients, args.max_seconds, connect)
                    )
                before = cpu_seconds(pid)
                timed.append(load(endpoint, mix, take(per_run), args.clients, args.max_seconds, connect))
                after = cpu_seconds(pid)
                if before is not None and after is not None:
                    timed[-1].server_cpu = after - before
                checked.append(timed[-1])
        problems = check(policy, state, checked, mix)
        print(f"{name}: {args.warmup} + {per_run} requests in-process ...", file=sys.stderr)
        with Guard.open(policy, state=baseline) as guard:
            direct = direct_client(guard)
            if args.warmup:
                load("in-process", mix, range(args.warmup), args.clients, args.max_seconds, direct)
            reference = load(
                "in-process",
                mix,
                range(args.warmup, args.warmup + per_run),
                args.clients,
                args.max_seconds,
                direct,
            )
    rows = []
    for run in [*timed, reference]:
        ratio = run.rate / reference.rate if reference.rate else float("nan")
        rows.append(f"| {name} | {run.endpoint} | {len(run.outcomes):,} | {summary(run)} | {ratio:.2f} |")
    print(f"{name}: {'OK' if not problems else '; '.join(problems)}", file=sys.stderr)
    return rows, [f"{name}: {p}" for p in problems]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--queries", type=int, default=10_000, help="timed requests in all (endpoints x policies)"
    )
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients per endpoint")
    parser.add_argument(
        "--warmup", type=int, default=100, help="untimed requests first, per endpoint (checked too)"
    )
    parser.add_argument("--max-seconds", type=float, default=120.0, help="time bound of each endpoint's run")
    parser.add_argument("--endpoints", default="http,pg", help="comma-separated: http, pg")
    parser.add_argument(
        "--policies", default="students,hospital-dp", help="comma-separated: " + ", ".join(MIXES)
    )
    args = parser.parse_args()

    endpoints = [e.strip() for e in args.endpoints.split(",") if e.strip()]
    if "pg" in endpoints and importlib.util.find_spec("guard.server.pgwire.server") is None:
        print("note: the PostgreSQL endpoint is not available here; HTTP only", file=sys.stderr)
        endpoints.remove("pg")
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    per_run = max(1, args.queries // (len(endpoints) * len(policies)))
    rows, failures = [], []
    for name in policies:
        policy_rows, problems = bench_policy(name, endpoints, per_run, args)
        rows += policy_rows
        failures += problems
    print(
        f"{args.clients} clients on loopback; ratio: queries/s over Guard.query in-process, as many threads\n"
    )
    print(
        "| policy | endpoint | requests | queries/s | p50 ms | p99 ms | server CPU ms/request "
        "| outcomes | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    if failures:
        print("\nFAILED:\n" + "\n".join(failures))
        return 1
    print(
        "\nchecks: no transport error; every request logged exactly once with its decision; "
        "hash chain intact; no budget overspent"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
