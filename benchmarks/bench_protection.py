"""Cell protection through the whole guard: GROUP BY CUBE answers with sensitivity rules,
primary and secondary suppression, against raw DuckDB on the same data.

For each case a table of people is generated so that the CUBE's inner cells have
sizes drawn from a mix: about 5 % with one or two people (sensitive under the
threshold rule) and the rest with 3..40; salaries are lognormal, with one dominant
person in a further ~1 % of cells. The guard's policy has ``threshold: 3`` and
``dominance: {n: 1, k: 0.6}``; the query is

    SELECT d1, d2[, d3], SUM(salary) FROM people GROUP BY CUBE (d1, d2[, d3])

Reported per case: cells, primary and secondary suppressions, the method, the guard's
time, raw DuckDB's time for the same CUBE, the time spent choosing the pattern
(sensitivity, suppression, LP audit), and the time of a repeated query (the pattern
is replayed from the history).

    python benchmarks/bench_protection.py [--cases 10x10,50x50,100x100,20x25x20] [--seed S]
"""

from __future__ import annotations

import argparse
import itertools
import re
import statistics
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import yaml

from guard import Guard
from guard.protection import decide as decide_module

CASES = ("10x10", "50x50", "100x100", "20x25x20")


def generate(shape: tuple[int, ...], rng: np.random.Generator, folder: Path) -> Path:
    """One row per person; columns d1..dn, salary."""
    rows: list[tuple[object, ...]] = []
    person = 0
    for cell in itertools.product(*(range(n) for n in shape)):
        draw = rng.random()
        size = int(rng.integers(1, 3)) if draw < 0.05 else int(rng.integers(3, 41))
        salaries = rng.lognormal(7.5, 0.6, size).round()
        if 0.05 <= draw < 0.06:
            salaries[0] = salaries.sum() * 3  # one dominant respondent
        for salary in salaries:
            person += 1
            rows.append((person, *(f"v{i:03d}" for i in cell), float(salary)))
    names = ["person_id", *(f"d{j + 1}" for j in range(len(shape))), "salary"]
    path = folder / "people.parquet"
    con = duckdb.connect()
    columns = list(zip(*rows, strict=True))
    frame = {name: list(values) for name, values in zip(names, columns, strict=True)}
    con.register("frame", __import__("pandas").DataFrame(frame))
    con.execute(f"COPY frame TO '{path}' (FORMAT parquet)")
    con.close()
    return path


def policy(folder: Path, data: Path, dims: int) -> Path:
    document = {
        "name": "bench",
        "state": str(folder / "state"),
        "protection": {
            "min_query_set_size": 1,
            "rules": [{"threshold": 3}, {"dominance": {"n": 1, "k": 0.6}}],
            "suppression": {"linked": "all"},
        },
        "tables": {
            "people": {
                "source": {"parquet": str(data)},
                "privacy_unit": "person_id",
                "columns": {
                    "person_id": {"role": "identifier"},
                    **{f"d{j + 1}": {"role": "dimension"} for j in range(dims)},
                    "salary": {"role": "measure", "bounds": [0, 1_000_000]},
                },
            }
        },
        "analysts": {"alice": {}},
    }
    path = folder / "bench.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def timed_decide() -> list[float]:
    """Patch decide() to record its wall time (the pattern choice, LP audit included)."""
    spent: list[float] = []
    original = decide_module.decide

    def wrapper(*args: object, **kwargs: object) -> object:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            spent.append(time.perf_counter() - started)

    import guard.protection.answer as protect_module

    protect_module.decide = wrapper  # type: ignore[assignment]
    return spent


def run_case(case: str, seed: int) -> dict[str, object]:
    shape = tuple(int(n) for n in case.split("x"))
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory(prefix="bench-protection-") as scratch:
        folder = Path(scratch)
        data = generate(shape, rng, folder)
        dims = ", ".join(f"d{j + 1}" for j in range(len(shape)))
        sql = f"SELECT {dims}, SUM(salary) AS salary FROM people GROUP BY CUBE ({dims})"
        raw = duckdb.connect()
        raw.execute(f"CREATE TABLE people AS SELECT * FROM '{data}'")
        raw_times = []
        for _ in range(5):
            started = time.perf_counter()
            raw.execute(sql).fetchall()
            raw_times.append(time.perf_counter() - started)
        raw.close()
        spent = timed_decide()
        with Guard.open(policy(folder, data, len(shape))) as guard:
            spent.clear()
            started = time.perf_counter()
            result = guard.query(sql, "alice")
            first = time.perf_counter() - started
            started = time.perf_counter()
            again = guard.query(sql, "alice")
            repeat = time.perf_counter() - started
        assert again.rows == result.rows, "a repeated query must get the same pattern"
        notes = " ".join(result.notes)
        primary = _count(r"(\d+) of \d+ cells suppressed as sensitive", notes)
        secondary = _count(r"(\d+) of \d+ cells suppressed as secondary", notes)
        method = re.search(r"method: (\w+)", notes)
        return {
            "case": case,
            "cells": len(result.rows),
            "primary": primary,
            "secondary": secondary,
            "method": method.group(1) if method else "none",
            "guard s": first,
            "pattern s": spent[0],
            "repeat s": repeat,
            "raw DuckDB s": statistics.median(raw_times),
        }


def _count(pattern: str, text: str) -> int:
    found = re.search(pattern, text)
    return int(found.group(1)) if found else 0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--seed", type=int, default=20261121)
    args = parser.parse_args()
    rows = [run_case(case, args.seed) for case in args.cases.split(",")]
    header = list(rows[0])
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row.values()) + " |")


if __name__ == "__main__":
    main()
