"""The suppression's deviation LPs through scipy's ``linprog`` against ``guard.highs``.

Reproduce (from the repository root, in the project's virtualenv)::

    python benchmarks/bench_lp.py [--rows 100000] [--lps 150] [--repeats 3]

Captures the first ``--lps`` deviation LPs (``guard.suppression.deviation``) that
bench_core's q13 solves after q02 and q10 (the linked income problem at its first
answer), then solves each with ``scipy.optimize.linprog(method="highs")`` and with
:func:`guard.highs.solve_lp`, interleaved, ``--repeats`` times, and prints the median
time per LP of each and their ratio. Both must agree: the same status, objective and
row duals (the pricing reads them), or the script stops.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import linprog

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import bench_core
from guard import Guard, highs
from guard.errors import GuardError
from guard.suppression import deviation


def capture(rows: int, count: int) -> list[tuple[Any, ...]]:
    captured: list[tuple[Any, ...]] = []
    solve = deviation.solve_lp

    def recording(*args: Any) -> highs.LpResult:
        if len(captured) < count:
            captured.append(args)
        return solve(*args)

    deviation.solve_lp = recording  # type: ignore[assignment]
    try:
        data = bench_core.generate(bench_core.DEFAULT_OUT, rows, 1, 20240601, 5)
        with tempfile.TemporaryDirectory() as state, Guard.open(data.policy, state=state) as guard:
            guard.prepare()
            for qid, sql in bench_core.QUERIES:
                if qid in ("q02", "q10", "q13"):
                    try:
                        guard.query(sql, analyst=bench_core.ANALYST)
                    except GuardError as error:
                        print(f"{qid}: {error}")
    finally:
        deviation.solve_lp = solve  # type: ignore[assignment]
    return captured


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--lps", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    lps = capture(args.rows, args.lps)
    scipy_s: list[float] = []
    ours_s: list[float] = []
    for _ in range(args.repeats):
        for cost, matrix, rhs, lower, upper in lps:
            started = time.perf_counter()
            theirs = linprog(
                cost, A_eq=matrix.tocsr(), b_eq=rhs, bounds=np.column_stack([lower, upper]), method="highs"
            )
            scipy_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            ours = highs.solve_lp(cost, matrix, rhs, lower, upper)
            ours_s.append(time.perf_counter() - started)
            assert (theirs.status == 0) == (ours.status is highs.LpStatus.OPTIMAL)
            if theirs.status == 0:
                assert abs(theirs.fun - ours.objective) <= 1e-6 * max(1.0, abs(theirs.fun))
                assert np.allclose(theirs.eqlin.marginals, ours.row_duals)
    a, b = statistics.median(scipy_s), statistics.median(ours_s)
    print(
        f"{len(lps)} deviation LPs x {args.repeats}: median per LP linprog {1000 * a:.2f} ms, "
        f"guard.highs {1000 * b:.2f} ms, ratio {a / b:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
