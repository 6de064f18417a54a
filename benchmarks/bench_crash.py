"""Crash under load: ``guard serve`` killed with SIGKILL while 16 clients query it, again and
again on the same state folder, then a check of what it recorded (issue 18).

Reproduce (from the repository root, in the project's virtualenv)::

    python benchmarks/bench_crash.py                      # 20 rounds per policy
    python benchmarks/bench_crash.py --rounds 5 --policies students

Each round starts ``guard serve`` on free loopback ports over the same state folder, runs
8 HTTP and 8 PostgreSQL clients (half alice, half bob) sending the tagged query mix of
``bench_endpoint.py``, and kills the server with SIGKILL after a random 0.3-2.5 s. After
all rounds the store is opened and checked:

* every response a client received has exactly one log row, with the decision the
  client saw (an answer may be lost in a crash, never the record of one);
* the hash chain verifies and no record is missing from the log's tail;
* no privacy budget account is spent beyond its limit (hospital-dp);
* every restart succeeded.

A Markdown summary goes to stdout; exit status 1 if any check failed. Loopback only,
bounded in rounds and time; nothing is left running.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_endpoint import (
    DECISIONS,
    MIXES,
    POLICIES,
    STARTUP,
    TAG,
    http_client,
    pg_client,
)
from guard import Guard
from guard.state.store import StateStore

CLIENTS_PER_ENDPOINT = 8


def serve(policy: Path, state: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """``guard serve`` on free ports; its process and URLs by endpoint (empty: no start)."""
    command = [sys.executable, "-c", "from guard.cli.main import main; main()", "serve"]
    command += ["--policy", str(policy), "--state", str(state), "--host", "127.0.0.1"]
    command += ["--http-port", "0", "--pg-port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    urls: dict[str, str] = {}
    assert process.stdout is not None
    deadline = time.monotonic() + STARTUP
    while time.monotonic() < deadline and len(urls) < 2:
        line = process.stdout.readline()
        if not line:
            break
        if match := re.match(r"\s+(HTTP|PostgreSQL)\s+(\S+)", line):
            urls[match.group(1).lower()] = match.group(2)
    return process, urls


def one_round(
    policy: Path, state: Path, mix: list[tuple[str, frozenset[str]]], first: int, rng: random.Random
) -> tuple[dict[int, str], bool]:
    """One server life: requests answered (number -> outcome), and whether it started."""
    process, urls = serve(policy, state)
    if len(urls) < 2:
        process.kill()
        process.wait(30)
        return {}, False
    received: dict[int, str] = {}
    lock = threading.Lock()
    counter = iter(range(first, first + 10_000_000))
    stop = threading.Event()

    def client(connect_of: object, analyst: str) -> None:
        try:
            send, close = connect_of(analyst)  # type: ignore[operator]
        except Exception:
            return  # the server died before this client connected
        try:
            while not stop.is_set():
                with lock:
                    number = next(counter)
                index = number % len(mix)
                sql = f"{mix[index][0].format(i=number)} /* request {number} */"
                try:
                    outcome = send(number, sql)
                except Exception:
                    return  # transport error: the server is gone
                with lock:
                    received[number] = outcome
        finally:
            with contextlib.suppress(Exception):
                close()

    threads = []
    for connect_of in (http_client(urls["http"]), pg_client(urls["postgresql"])):
        for n in range(CLIENTS_PER_ENDPOINT):
            thread = threading.Thread(target=client, args=(connect_of, "alice" if n % 2 else "bob"))
            thread.start()
            threads.append(thread)
    time.sleep(rng.uniform(0.3, 2.5))
    process.send_signal(signal.SIGKILL)
    process.wait(30)
    stop.set()
    for thread in threads:
        thread.join(60)
    return received, True


def check(policy: Path, state: Path, received: dict[int, str]) -> list[str]:
    problems = []
    store = StateStore(state, read_only=True)
    try:
        log = store.log()
        chain = store.check_chain()
    finally:
        store.close()
    tags = Counter(int(m.group(1)) for r in log if (m := TAG.search(r["sql"] or "")))
    decisions = {int(m.group(1)): r["decision"] for r in log if (m := TAG.search(r["sql"] or ""))}
    lost = [n for n in received if tags.get(n, 0) == 0]
    twice = [n for n, count in tags.items() if count > 1]
    wrong = [n for n, outcome in received.items() if n in decisions and decisions[n] != DECISIONS[outcome]]
    if lost:
        problems.append(f"{len(lost)} answered requests without a log row, e.g. {lost[:5]}")
    if twice:
        problems.append(f"{len(twice)} requests logged twice, e.g. {twice[:5]}")
    if wrong:
        problems.append(f"{len(wrong)} requests logged with another decision than the client saw")
    if chain.broken is not None:
        problems.append(
            f"hash chain broken at record {chain.broken} (missing from the tail: {chain.missing})"
        )
    with Guard.open(policy, state=state) as guard:
        if guard.noise is not None:
            for account in guard.budget()["accounts"]:
                limit = account["limit"]
                if limit is not None and Fraction(account["spent"]["exact"]) > Fraction(limit["exact"]):
                    problems.append(f"{account['account']} overspent: {account['spent']['exact']}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="server lives per policy")
    parser.add_argument("--policies", nargs="+", default=["students", "hospital-dp"], choices=sorted(MIXES))
    parser.add_argument("--seed", type=int, default=7, help="seed of the kill delays")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    rows, failed = [], False
    for name in args.policies:
        policy = POLICIES / f"{name}.yaml"
        with tempfile.TemporaryDirectory(prefix="bench-crash-") as folder:
            state = Path(folder) / "state"
            received: dict[int, str] = {}
            starts = 0
            for round_ in range(args.rounds):
                got, started = one_round(policy, state, MIXES[name], round_ * 10_000_000, rng)
                received.update(got)
                starts += started
                print(f"{name}: round {round_ + 1}/{args.rounds}: {len(got)} answers", file=sys.stderr)
            problems = check(policy, state, received)
            if starts != args.rounds:
                problems.append(f"{args.rounds - starts} restarts failed")
            failed |= bool(problems)
            outcomes = Counter(received.values())
            mix = ", ".join(f"{outcomes[k]} {k}" for k in ("answered", "refused", "rejected"))
            found = "; ".join(problems) or "none"
            rows.append(f"| {name} | {args.rounds} | {starts} | {len(received):,} ({mix}) | {found} |")
    print("| policy | SIGKILL rounds | restarts ok | responses received | problems |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
