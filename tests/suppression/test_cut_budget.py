"""The cut loop stops on work (simplex iterations, master nodes), not on the clock: one
input with one secret gives one pattern on a quiet machine and a loaded one."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from guard.suppression import Table, Weight
from guard.suppression import cuts as cuts_module
from guard.suppression.certificates import Certificates
from guard.suppression.costs import perturbed_costs
from guard.suppression.cuts import solve_by_cuts
from guard.suppression.heuristic import solve_heuristic
from guard.suppression.model import Levels
from tests.suppression.test_redundancy import problem

CubeTable = Callable[[np.ndarray], Table]
#: what the loop returned: withheld cells, complete, proven, bound
Run = tuple[frozenset[int], bool, bool, float]
#: the fail-safe clock, never reached here (the loop stops on its iterations in 2 s)
_FAIL_SAFE = 60.0


class _SlowClock:
    """``time.perf_counter`` of a machine where every look at the clock finds 50 ms
    gone (the loop looks a few hundred times: tens of seconds, not one or two)."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += 0.05
        return self.now


def _run(
    table: Table, levels: Levels, costs: np.ndarray, start: frozenset[int], iterations: int, bridges: bool
) -> Run:
    outcome = solve_by_cuts(
        table,
        levels,
        costs,
        start=start,
        iterations=iterations,
        nodes=200,
        time_limit=_FAIL_SAFE,
        gap=0.05,
        bridges=bridges,
    )
    assert outcome is not None
    return outcome.suppressed, outcome.complete, outcome.proven, round(outcome.bound, 9)


# with the bridge rows (3-D tables online) the loop ends in fewer looks at the clock at
# 400 iterations, not far past 2 seconds of it: 1,500 iterations there
@pytest.mark.parametrize(("iterations", "bridges"), [(400, False), (1_500, False), (1_500, True)])
def test_the_same_work_gives_the_same_pattern_on_a_slow_clock(
    cube_table: CubeTable, monkeypatch: pytest.MonkeyPatch, iterations: int, bridges: bool
) -> None:
    table, levels = problem(cube_table, (5, 5, 4), 13)
    costs = perturbed_costs(table, Weight.COUNT, 0.5, 13)
    start = solve_heuristic(table, levels, costs, Certificates(table))
    quiet = _run(table, levels, costs, start, iterations, bridges)
    clock = _SlowClock()
    monkeypatch.setattr(cuts_module.time, "perf_counter", clock.perf_counter)
    loaded = _run(table, levels, costs, start, iterations, bridges)
    assert clock.now > 10.0  # the clock was read, and ran far past a 2-second budget
    assert loaded == quiet
    # the budget decides where the loop stops: more work, a higher bound
    more = _run(table, levels, costs, start, 4 * iterations, bridges)
    assert more[3] > quiet[3]
