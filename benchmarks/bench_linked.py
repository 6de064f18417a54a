"""A 3-D table asked after its 2-D margins, against the same table asked alone.

Data and policy as in :mod:`benchmarks.bench_protection` (people in a d1 x d2 x d3
grid, ``threshold: 3``, ``dominance: {n: 1, k: 0.6}``, linked tables on, the policy's
suppression defaults: value weights, MILP 2 s). On a fresh state each:

* **alone**: ``SELECT d1, d2, d3, SUM(salary) ... GROUP BY CUBE (d1, d2, d3)``;
* **after margins**: ``GROUP BY CUBE (d1, d2)``, ``CUBE (d1, d3)``, ``CUBE (d2, d3)``
  first, then the same 3-D CUBE.

Reported: cells of the 3-D answer withheld (and their share of the answer's value:
withheld inner cells over the grand total), the 3-D answer's time, and the margins'
withheld cells; "refused" when the guard refuses.

    python benchmarks/bench_linked.py [--cases 6x6x6,8x8x8] [--seeds 0,1,2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np

from benchmarks.bench_protection import generate, policy
from guard import Guard
from guard.errors import QueryRefused

CUBE = "SELECT {dims}, SUM(salary) AS salary FROM people GROUP BY CUBE ({dims})"


def withheld(result: object) -> tuple[int, list[tuple[object, ...]]]:
    """Withheld SUM cells of an answer and their keys."""
    rows = result.rows  # type: ignore[attr-defined]
    flags = result.flags  # type: ignore[attr-defined]
    keys = [tuple(row[:-1]) for row, flag in zip(rows, flags, strict=True) if flag[-1] == "suppressed"]
    return len(keys), keys


def run(shape: tuple[int, ...], seed: int) -> dict[str, str]:
    rng = np.random.default_rng(seed)
    out: dict[str, str] = {"case": "x".join(map(str, shape)), "seed": str(seed)}
    with tempfile.TemporaryDirectory(prefix="bench-linked-") as scratch:
        folder = Path(scratch)
        data = generate(shape, rng, folder)
        raw = duckdb.connect()
        truth = {
            tuple(r[:3]): float(r[3])
            for r in raw.execute(
                f"SELECT d1, d2, d3, SUM(salary) FROM '{data}' GROUP BY CUBE (d1, d2, d3)"
            ).fetchall()
        }
        raw.close()
        grand = truth[(None, None, None)]
        full = CUBE.format(dims="d1, d2, d3")
        for scenario, before in (("alone", []), ("after margins", ["d1, d2", "d1, d3", "d2, d3"])):
            (folder / "state").mkdir(exist_ok=True)
            state = folder / f"state-{scenario.replace(' ', '-')}"
            with Guard.open(policy(folder, data, 3), state=state) as guard:
                margins = 0
                try:
                    for dims in before:
                        margins += withheld(guard.query(CUBE.format(dims=dims), "alice"))[0]
                    started = time.perf_counter()
                    result = guard.query(full, "alice")
                    seconds = time.perf_counter() - started
                except QueryRefused:
                    out[scenario] = "refused"
                    continue
            count, keys = withheld(result)
            inner = sum(truth[k] for k in keys if None not in k)
            out[scenario] = f"{count} ({100 * inner / grand:.1f} %, {seconds:.1f} s)"
            if before:
                out["margins withheld"] = str(margins)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", default="6x6x6,8x8x8")
    parser.add_argument("--seeds", default="0,1,2")
    args = parser.parse_args()
    columns = ("case", "seed", "alone", "after margins", "margins withheld")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for spec in args.cases.split(","):
        shape = tuple(int(x) for x in spec.split("x"))
        for seed in (int(s) for s in args.seeds.split(",")):
            row = run(shape, seed)
            print("| " + " | ".join(row.get(c, "-") for c in columns) + " |", flush=True)


if __name__ == "__main__":
    main()
