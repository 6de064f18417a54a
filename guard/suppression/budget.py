"""The cut loop's budget: counts of work that decide where it stops, and the clock as a
fail-safe only (:mod:`~guard.suppression.cuts`).

Two counts, both the same on a quiet machine and a loaded one:

- simplex iterations over every LP and MILP the loop solves, as HiGHS counts them,
  looked at between solves;
- optionally, *checks* inside the master MILPs: HiGHS calls its MIP interrupt callback
  at fixed points of its search ("MIP check limits": root separation rounds, heuristics,
  nodes), and the budget interrupts the MILP once the loop's checks reach a limit.
  HiGHS 1.16 has no iteration or work limit for a MIP (``simplex_iteration_limit`` is
  ignored there, and the callback's own iteration count reads -1), and on 3-D tables of
  500-1,300 cells one master root took up to 19 s at load 12 (session 15), past any
  node limit, so only the clock stopped it. The checks bound the root too.

The clock (``deadline``) stops the loop only on a machine far slower than the counts
assume; then ``timed_out`` is set, and the caller keeps the pattern it had before the
loop (fails closed: what the loop would have found depends on the load).
"""

from __future__ import annotations

import time

import highspy
import numpy as np

__all__ = ["Budget"]


class Budget:
    """The loop's work so far against its limits; and the fail-safe clock."""

    def __init__(self, deadline: float, iterations: int | None, checks: int | None = None) -> None:
        self._deadline = deadline
        self._limit = iterations
        self._checks = checks
        #: simplex iterations so far
        self.used = 0
        #: MIP checks so far (counted only with a limit)
        self.looked = 0
        #: the clock stopped the loop (the fail-safe fired)
        self.timed_out = False

    def watch(self, highs: highspy.Highs) -> None:
        """Count ``highs``'s MIP checks, and interrupt it when they reach the limit
        (nothing without a limit)."""
        if self._checks is None:
            return
        limit = self._checks

        def look(event: highspy.cb.HighsCallbackEvent) -> None:  # type: ignore[name-defined]
            self.looked += 1
            if self.looked >= limit:
                event.interrupt()

        highs.cbMipInterrupt.subscribe(look)

    def run(self, highs: highspy.Highs) -> None:
        """``highs.run()`` within the clock left, its iterations counted. Stopped by the
        clock, the loop ends: what would follow depends on the load."""
        # HiGHS counts its limit on the instance's clock, which runs on across solves
        highs.setOptionValue("time_limit", float(highs.getRunTime()) + max(self._left(), 1e-3))
        highs.run()
        self.used += max(0, int(highs.getInfo().simplex_iteration_count))
        if highs.getModelStatus() == highspy.HighsModelStatus.kTimeLimit:
            self._deadline = -np.inf
            self.timed_out = True

    def half(self) -> tuple[int | None, float]:
        """The point (iterations, clock) by which half of what is left is spent: by the
        iterations when they are limited (the clock is then the fail-safe's only)."""
        if self._limit is not None:
            return self.used + (self._limit - self.used) // 2, self._deadline
        now = time.perf_counter()
        return None, now + (self._deadline - now) / 2

    def spent(self, mark: tuple[int | None, float] | None = None) -> bool:
        """Whether the work reached ``mark`` (default: the whole budget)."""
        limit, clock = (self._limit, self._deadline) if mark is None else mark
        if limit is not None and self.used >= limit:
            return True
        if mark is None and self._checks is not None and self.looked >= self._checks:
            return True
        now = time.perf_counter()  # one look (a slowed clock in the tests counts looks)
        if now >= self._deadline:
            self.timed_out = True
            return True
        return now >= clock

    def _left(self) -> float:
        return self._deadline - time.perf_counter()
