"""``guard explain`` against the query path: the same values withheld, and what it costs.

Reproduce (from the repository root, in the project's virtualenv)::

    python benchmarks/bench_explain.py --rows 100000

bench_core's table and its twenty queries, in order on one fresh, prepared state: each is
explained first (``Guard.explain``: the cell protection, then the history audit on audit
states rebuilt from the store, releasing nothing; ``guard/history/preview.py``), then
asked (``Guard.query``). Printed per query: the explanation's and the answer's
milliseconds, whether the explanation's answer has exactly the answer's flags (a refusal
against every value withheld), how many values the explanation lists as withheld by
the history audit, and how many of those it bounds (``guard/history/heldintervals.py``:
at most ``MAX_HELD_INTERVALS`` per explanation). The explanation's cost is mostly the
rebuilding of the audit states from every earlier release, so it grows with the history. Exit status 1 when an
explanation differs from its answer.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import bench_core
from guard import Guard
from guard.errors import QueryRefused
from guard.history.controls import HistoryControl, control_text
from guard.protection.explain import Explanation
from guard.result import Flag, ProtectedResult


def _agrees(explained: Explanation | None, answer: ProtectedResult | None) -> bool:
    """The explanation withholds what the answer does; a refusal is every value withheld
    (or the explanation refused too, by the cell protection)."""
    if answer is not None:
        return explained is not None and explained.result.flags == answer.flags
    if explained is None:
        return True
    aggregates = explained.result.aggregates or range(len(explained.result.columns))
    return all(row[c] == Flag.SUPPRESSED.value for row in explained.result.flags for c in aggregates)


def main(argv: list[str] | None = None) -> int:
    args = bench_core.data_parser(__doc__, rows=100_000).parse_args(argv)
    data = bench_core.generate(args.out, args.rows, 1, args.seed, 5)
    print(f"{'query':6} {'explain ms':>11} {'query ms':>10}  same  history-withheld  with interval")
    differs = 0
    with tempfile.TemporaryDirectory() as state, Guard.open(data.policy, state=state) as guard:
        guard.prepare()
        words = tuple(control_text(c.value, guard.policy.protection.history_k) for c in HistoryControl)
        for qid, sql in bench_core.QUERIES:
            started = time.perf_counter()
            try:
                explained: Explanation | None = guard.explain(sql, "alice")
            except QueryRefused:
                explained = None
            explain_ms = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            try:
                answer: ProtectedResult | None = guard.query(sql, "alice")
            except QueryRefused:
                answer = None
            query_ms = (time.perf_counter() - started) * 1000
            same = _agrees(explained, answer)
            differs += not same
            cells = [] if explained is None else [c for c in explained.cells if c.status.startswith(words)]
            bounded = sum(c.width == c.width for c in cells)  # NaN: not computed
            flag = "yes" if same else "NO"
            print(f"{qid:6} {explain_ms:11.1f} {query_ms:10.1f}  {flag:4}  {len(cells):16}  {bounded}")
    return 1 if differs else 0


if __name__ == "__main__":
    raise SystemExit(main())
