"""The benchmark harnesses behind one command (python -m benchmarks).

    python -m benchmarks backends --engines duckdb,postgres,spark --rows 1000000
    python -m benchmarks all [--quick] [--out FILE.md]

``backends`` times the guard against the same SQL on each engine (bench_backends.py);
``topn`` the two top-n templates of PostgreSQL and Spark (bench_topn.py);
``all`` runs every harness in sequence as subprocesses and collects their reports into
one Markdown file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import bench_backends

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@dataclass(frozen=True)
class Part:
    """One harness of ``all``: its arguments, in full and in ``--quick`` mode."""

    name: str
    command: tuple[str, ...]
    full: tuple[str, ...]
    quick: tuple[str, ...]


#: the backends part with --quick: bench_core's queries without q12 and q19
QUICK_QUERIES = "q01,q02,q04,q06,q08,q10,q14,q16,q20"
#: the harnesses ``all`` runs, in order (bench_core and bench_noise have their own
#: reports in RESULTS.md; the backends part covers DuckDB through bench_core's data)
PARTS = (
    Part(
        "backends",
        ("-m", "benchmarks", "backends"),
        ("--rows", "1000000"),
        # without q12 and q19: on small tables their many sensitive cells make the first
        # answer run secondary suppression for minutes
        ("--rows", "100000", "--repeat", "5", "--queries", QUICK_QUERIES),
    ),
    Part("topn", ("benchmarks/bench_topn.py",), (), ("--rows", "100000", "--repeat", "3")),
    Part(
        "suppression",
        ("benchmarks/bench_suppression.py",),
        (),
        ("--cases", "10x10,50x50,100x100"),
    ),
    Part("audit", ("benchmarks/bench_audit.py",), (), ("--rows", "100000", "--queries", "1000")),
    Part(
        "endpoint",
        ("benchmarks/bench_endpoint.py",),
        ("--queries", "2000", "--warmup", "50"),
        ("--queries", "400", "--warmup", "20", "--max-seconds", "60"),
    ),
)


def available_engines() -> str:
    """The engines that can run here (DuckDB always)."""
    from tests.backends.pg_server import postgres_available
    from tests.backends.spark_session import spark_available

    engines = ["duckdb"]
    for name, reason in (("postgres", postgres_available()), ("spark", spark_available())):
        if reason is None:
            engines.append(name)
        else:
            print(f"all: skipping {name}: {reason}", file=sys.stderr)
    return ",".join(engines)


def as_markdown(report: str) -> str:
    """A harness's stdout as Markdown: plain-text reports (bench_suppression's) go in a fence."""
    text = report.strip("\n")
    if text.lstrip().startswith(("#", "|")):
        return text
    return f"```\n{text}\n```"


def run_all(args: argparse.Namespace) -> int:
    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    out: Path = args.out or HERE / ".data" / f"results-{date}{'-quick' if args.quick else ''}.md"
    chosen = [p.strip() for p in args.parts.split(",")]
    unknown = [p for p in chosen if p not in {part.name for part in PARTS}]
    if unknown:
        known = ", ".join(part.name for part in PARTS)
        raise SystemExit(f"--parts: unknown {', '.join(unknown)}; known: {known}")
    sections = [f"# statguard benchmarks, {date}{' (quick)' if args.quick else ''}\n"]
    failed = []
    for part in PARTS:
        if part.name not in chosen:
            continue
        extra = part.quick if args.quick else part.full
        if part.name == "backends":
            extra = ("--engines", args.engines or available_engines(), *extra)
        if part.name == "topn":  # the templates of engines without a top-n aggregate
            engines = [e for e in (args.engines or available_engines()).split(",") if e != "duckdb"]
            if not engines:
                print("all: skipping topn: neither PostgreSQL nor Spark is available", file=sys.stderr)
                continue
            extra = ("--engines", ",".join(engines), *extra)
        command = [sys.executable, *part.command, *extra]
        shown = shlex.join(["python", *command[1:]])
        print(f"== {part.name}: {shown}", file=sys.stderr, flush=True)
        started = time.perf_counter()
        # stderr (progress) goes to the terminal; stdout (the report) is collected
        done = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, text=True, check=False)
        seconds = time.perf_counter() - started
        status = "ok" if done.returncode == 0 else f"exit status {done.returncode}"
        if done.returncode:
            failed.append(part.name)
        sections.append(
            f"## {part.name}\n\n`{shown}` ({seconds:.0f} s, {status})\n\n{as_markdown(done.stdout)}\n"
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(sections))  # as it goes: a late failure keeps the early parts
    print(f"results written to {out}" + (f"; FAILED: {', '.join(failed)}" if failed else ""), file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    backends = commands.add_parser(
        "backends",
        help="the guard against the same SQL on DuckDB, PostgreSQL and Spark",
        description=bench_backends.__doc__.split("\n\n")[0],
    )
    bench_backends.add_arguments(backends)
    every = commands.add_parser(
        "all",
        help="every harness in sequence, reports collected into one Markdown file",
        description="Run backends, topn, suppression, audit and endpoint as subprocesses; collect reports.",
    )
    every.add_argument("--quick", action="store_true", help="small sizes: a look in a few minutes")
    every.add_argument("--out", type=Path, help="results file (default benchmarks/.data/results-<date>.md)")
    every.add_argument(
        "--parts",
        default=",".join(p.name for p in PARTS),
        help="comma-separated subset of: " + ", ".join(p.name for p in PARTS),
    )
    every.add_argument("--engines", help="engines of the backends part (default: those available here)")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if args.command == "backends":
        args.argv = argv[1:]
        return bench_backends.run(args)
    return run_all(args)


if __name__ == "__main__":
    sys.exit(main())
