"""Secondary suppression timings on synthetic tables with all marginals.

Cases: 2-D tables 10x10, 50x50, 100x100 and a 3-D table 20x25x20 (11 466 cells with
marginals; "/all" lets the heuristic reuse every withheld cell: slower, fewer cells).
About 5 % of the inner cells are sensitive, with protection levels of 30 % of their
value (both directions); information loss by cell value. Reports the method the size
threshold chose (optimal MILP or heuristic), the time, and the pattern's size; with
``--audit`` the pattern is also re-checked by the independent LP audit (slow on the
3-D case, about 12 minutes: two LPs per sensitive cell over all withheld cells).

    python benchmarks/bench_suppression.py [--cases 10x10,50x50] [--time-limit 5] [--audit]
"""

from __future__ import annotations

import argparse
import itertools
import time
from dataclasses import dataclass

import numpy as np

from guard.suppression import (
    TOTAL,
    Key,
    Protection,
    SuppressionOptions,
    Table,
    choose_method,
    failures,
    suppress,
)

CASES = ("10x10", "50x50", "100x100", "20x25x20", "20x25x20/all")


@dataclass(frozen=True)
class Row:
    case: str
    cells: int
    relations: int
    primary: int
    secondary: int
    method: str
    optimal: bool
    seconds: float
    audit: str


def cube(shape: tuple[int, ...], rng: np.random.Generator) -> Table:
    """Skewed positive magnitudes with every marginal (GROUP BY CUBE)."""
    values = np.round(rng.lognormal(mean=4.0, sigma=1.0, size=shape)) + 1
    cells: dict[Key, float] = {}
    for key in itertools.product(*[[*range(size), TOTAL] for size in shape]):
        index = tuple(slice(None) if k is TOTAL else k for k in key)
        cells[key] = float(values[index].sum())
    return Table.from_cells(cells)


def run(case: str, time_limit: float, check: bool, seed: int) -> Row:
    spec, _, variant = case.partition("/")
    shape = tuple(int(x) for x in spec.split("x"))
    rng = np.random.default_rng(seed)
    table = cube(shape, rng)
    inner = [k for k in table.keys if TOTAL not in k]
    picked = rng.choice(len(inner), size=max(1, round(0.05 * len(inner))), replace=False)
    sensitive = {
        inner[i]: Protection(0.3 * table.value(inner[i]), 0.3 * table.value(inner[i])) for i in picked
    }
    # "/all": the heuristic may reuse every withheld cell (default only up to 5 000 cells)
    options = SuppressionOptions(time_limit=time_limit, reuse_distant=True if variant == "all" else None)
    start = time.perf_counter()
    result = suppress(table, sensitive, options=options, seed=seed)
    seconds = time.perf_counter() - start
    verdict = "-"
    if check:
        begin = time.perf_counter()
        failing = failures(table, result.suppressed, sensitive)
        verdict = f"{'ok' if not failing else f'{len(failing)} FAIL'} ({time.perf_counter() - begin:.1f}s)"
    chosen = choose_method(table, len(sensitive), options)
    method = result.method.value if result.method is chosen else f"{chosen.value}->{result.method.value}"
    return Row(
        case=case,
        cells=len(table),
        relations=len(table.relations),
        primary=len(result.primary),
        secondary=len(result.secondary),
        method=method + (" (all)" if variant == "all" else ""),
        optimal=result.optimal,
        seconds=seconds,
        audit=verdict,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--cases", default=",".join(CASES), help="comma-separated shapes, e.g. 10x10,20x25x20"
    )
    parser.add_argument(
        "--time-limit", type=float, default=5.0, help="MILP seconds before the heuristic competes"
    )
    parser.add_argument("--audit", action="store_true", help="re-check every pattern with the LP audit")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    header = ("case", "cells", "relations", "primary", "secondary", "method", "optimal", "seconds", "audit")
    print(" | ".join(f"{h:>14}" for h in header))
    print("-+-".join("-" * 14 for _ in header))
    for case in args.cases.split(","):
        row = run(case.strip(), args.time_limit, args.audit, args.seed)
        cells = (
            row.case,
            row.cells,
            row.relations,
            row.primary,
            row.secondary,
            row.method,
            "yes" if row.optimal else "no",
            f"{row.seconds:.2f}",
            row.audit,
        )
        print(" | ".join(f"{c!s:>14}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
