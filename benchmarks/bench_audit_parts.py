"""Where the history audit's time goes: ``bench_audit.py`` with its stages timed.

Reproduce (from the repository root, in the project's virtualenv)::

    python benchmarks/bench_audit_parts.py --rows 100000 --queries 700

Takes ``bench_audit.py``'s arguments, runs it unchanged, and times these calls of every
decision (wrapped, so the guard's code is not edited): the screen's check of one cell, the
exact group search (``GroupSearch.check``), its exact rows (``Exposure.rows_exactly``),
its branch and bound (``GroupSearch._smallest``), the release, and the basis tidying after
it. Prints total / p50 / p95 / max per stage at the end, and every ``--every`` checks.
"""

from __future__ import annotations

import argparse
import collections
import runpy
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from guard.history import exposure, groups, screen, span  # noqa: E402

TIMES: dict[str, list[float]] = collections.defaultdict(list)


def _report(last: int | None = None) -> None:
    for label, values in TIMES.items():
        v = np.array(values[-last:] if last else values)
        print(
            f"    {label:<14} calls {v.size:>6}  total {v.sum() / 1000:8.1f} s"
            f"  p50 {np.percentile(v, 50):8.2f}  p95 {np.percentile(v, 95):9.2f}  max {v.max():10.1f} ms",
            flush=True,
        )


def _wrap(owner: Any, name: str, label: str, every: int) -> None:
    inner: Callable[..., Any] = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        out = inner(*args, **kwargs)
        TIMES[label].append((time.perf_counter() - start) * 1000)
        if label == "screen check" and every and len(TIMES[label]) % every == 0:
            print(f"  stages over the last {every} checks:", flush=True)
            _report(every)
        return out

    setattr(owner, name, timed)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--every", type=int, default=0, help="also print the stages every N checks")
    own, rest = parser.parse_known_args()
    _wrap(screen.HistoryScreen, "_check", "screen check", own.every)
    _wrap(groups.GroupSearch, "check", "group search", own.every)
    _wrap(exposure.Exposure, "rows_exactly", "exact rows", own.every)
    _wrap(groups.GroupSearch, "_smallest", "branch+bound", own.every)
    _wrap(span.SpanAuditor, "release", "release", own.every)
    _wrap(groups.GroupSearch, "tidy", "tidy", own.every)
    sys.argv = [str(HERE / "bench_audit.py"), *rest]
    try:
        runpy.run_path(str(HERE / "bench_audit.py"), run_name="__main__")
    finally:
        print("stages over the whole run:")
        _report()


if __name__ == "__main__":
    main()
