"""The cut loop on 3-D tables above the recombination's size: stopped by work (simplex
iterations and the masters' MIP checks, guard/suppression/budget.py), never by the clock
in a normal run, and failing closed (the pattern before the loop) when the clock fires."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from guard.suppression import Protection, SuppressionOptions, Table, Weight, improvement, suppress
from guard.suppression import budget as budget_module
from guard.suppression import cuts as cuts_module
from guard.suppression.certificates import Certificates
from guard.suppression.costs import perturbed_costs
from guard.suppression.cuts import solve_by_cuts
from guard.suppression.heuristic import solve_heuristic
from tests.suppression.test_redundancy import problem, protected

CubeTable = Callable[[np.ndarray], Table]
#: recombine_limit 0: a small 3-D table counts as "above the recombination's size"
#: (8 x 8 x 8 and larger online); the local search off, so the cut loop alone decides
_ABOVE = SuppressionOptions(weight=Weight.COUNT, optimal_limit=0, recombine_limit=0, moves=0, time_limit=2.0)


class _Clock:
    """``time.perf_counter`` that runs ``step`` seconds per look."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.now = 0.0

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def _case(cube_table: CubeTable) -> tuple[Table, dict[Any, Protection]]:
    table, levels = problem(cube_table, (5, 5, 4), 2)
    return table, {table.keys[p]: Protection(*lv) for p, lv in levels.items()}


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The keyword arguments and outcome of every cut loop ``improve`` runs."""
    calls: list[dict[str, Any]] = []
    real = improvement.solve_by_cuts

    def spy(*args: Any, **kwargs: Any) -> Any:
        outcome = real(*args, **kwargs)
        calls.append({**kwargs, "outcome": outcome})
        return outcome

    monkeypatch.setattr(improvement, "solve_by_cuts", spy)
    return calls


def test_the_same_cells_twice_and_on_a_slow_clock(
    cube_table: CubeTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    table, requirements = _case(cube_table)
    calls = _spy(monkeypatch)
    first = suppress(table, requirements, options=_ABOVE, seed=2)
    again = suppress(table, requirements, options=_ABOVE, seed=2)
    # each look at the clock finds 10 ms gone: about 14 s of it in the loop, 7 times
    # the 2 s the budget stands for, within the 30 s fail-safe (20 ms reach it)
    clock = _Clock(0.01)
    monkeypatch.setattr(budget_module.time, "perf_counter", clock)
    loaded = suppress(table, requirements, options=_ABOVE, seed=2)
    assert clock.now > 6.0
    assert first.suppressed == again.suppressed == loaded.suppressed
    assert [c["checks"] for c in calls] == [improvement.MASTER_CHECKS] * 3
    assert not any(c["outcome"].timed_out for c in calls)
    # the loop improved the pattern (26 cells against 32 without it)
    without = suppress(
        table, requirements, options=SuppressionOptions(**{**_ABOVE.__dict__, "cut_limit": 0}), seed=2
    )
    assert len(first.suppressed) < len(without.suppressed)
    assert protected(
        table,
        {table.index(k) for k in first.suppressed},
        {table.index(k): (r.upper, r.lower) for k, r in requirements.items()},
    )


def test_the_clock_past_the_fail_safe_keeps_the_pattern_before_the_loop(
    cube_table: CubeTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    table, requirements = _case(cube_table)
    without = suppress(
        table, requirements, options=SuppressionOptions(**{**_ABOVE.__dict__, "cut_limit": 0}), seed=2
    )
    calls = _spy(monkeypatch)
    # the clock jumps an hour once the first master MILP has given a pattern: the loop
    # has found something, and the fail-safe fires at its next look
    solved: list[bool] = []
    real_solve = cuts_module._Master.solve
    real_clock = time.perf_counter

    def solve(self: Any, *, integral: bool, start: Any = None) -> Any:
        out = real_solve(self, integral=integral, start=start)
        solved.append(integral and out is not None)
        return out

    monkeypatch.setattr(cuts_module._Master, "solve", solve)
    monkeypatch.setattr(budget_module.time, "perf_counter", lambda: real_clock() + 3600.0 * any(solved))
    timed = suppress(table, requirements, options=_ABOVE, seed=2)
    assert any(solved) and calls and calls[0]["outcome"].timed_out
    assert calls[0]["outcome"].suppressed  # the loop had a pattern when the clock fired
    assert timed.suppressed == without.suppressed  # fails closed: the loop's find is dropped


@pytest.mark.parametrize("checks", [3, 12])
def test_the_masters_stop_on_their_checks(cube_table: CubeTable, checks: int) -> None:
    table, levels = problem(cube_table, (5, 5, 4), 13)
    costs = perturbed_costs(table, Weight.COUNT, 0.5, 13)
    start = solve_heuristic(table, levels, costs, Certificates(table))
    real = budget_module.Budget.watch

    def watch(self: budget_module.Budget, highs: Any) -> None:
        real(self, highs)
        budgets.append(self)

    budgets: list[budget_module.Budget] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(budget_module.Budget, "watch", watch)
        runs = [
            solve_by_cuts(
                table,
                levels,
                costs,
                start=start,
                iterations=None,
                nodes=200,
                time_limit=60.0,
                gap=0.05,
                checks=checks,
            )
            for _ in range(2)
        ]
    assert [b.looked for b in budgets] == [checks, checks]  # interrupted at the limit
    first, second = runs
    assert first is not None and second is not None and not first.timed_out
    assert (first.suppressed, first.bound) == (second.suppressed, second.bound)


def test_only_cells_every_pattern_withholds_skip_the_search(
    cube_table: CubeTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    table, levels = problem(cube_table, (5, 5, 4), 2)
    calls = _spy(monkeypatch)
    costs = perturbed_costs(table, Weight.COUNT, 0.5, 2)
    # the pattern is the sensitive cells and cells forced by an earlier release: it
    # need not protect (the skip is about cost, not protection)
    forced = frozenset(range(0, len(table), 2)) - set(levels)
    hidden = forced | frozenset(levels)
    start = improvement.Improved(hidden, Certificates(table), False)
    out = improvement.improve(table, levels, costs, start, forced, frozenset(), _ABOVE)
    assert out[0] == hidden and not calls
    # one complementary cell more: the loop runs
    extra = next(i for i in range(len(table)) if i not in hidden)
    start = improvement.Improved(hidden | {extra}, Certificates(table), False)
    improvement.improve(table, levels, costs, start, forced, frozenset(), _ABOVE)
    assert calls


def test_the_local_search_also_starts_from_the_pattern_before_the_cut_loop(
    cube_table: CubeTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    # from the cut loop's pattern one 8 x 8 x 8 descent ended 3 cells above the descent
    # from the pattern before it: on tables up to _BOTH_CELLS both run, the cheaper end wins
    table, levels = problem(cube_table, (5, 5, 4), 2)
    requirements = {table.keys[p]: Protection(*lv) for p, lv in levels.items()}
    options = SuppressionOptions(weight=Weight.COUNT, optimal_limit=0, recombine_limit=0, time_limit=2.0)
    calls: list[tuple[frozenset[int], frozenset[int]]] = []
    real = improvement.improve_locally

    def spy(*args: Any, **kwargs: Any) -> tuple[frozenset[int], Any]:
        hidden, proofs = real(*args, **kwargs)
        calls.append((frozenset(args[3]), hidden))
        return hidden, proofs

    monkeypatch.setattr(improvement, "improve_locally", spy)
    result = suppress(table, requirements, options=options, seed=2)
    assert len(calls) == 2 and calls[0][0] != calls[1][0]  # two different starts
    costs = perturbed_costs(table, Weight.COUNT, options.perturbation, 2)
    ends = [float(costs[list(end)].sum()) for _, end in calls]
    # the first is the cut loop's start, cheaper than the one before it
    assert costs[list(calls[0][0])].sum() < costs[list(calls[1][0])].sum()
    chosen = {table.index(k) for k in result.suppressed}
    assert float(costs[list(chosen)].sum()) == pytest.approx(min(ends))
    assert protected(table, chosen, levels)
    # above _BOTH_CELLS only the cut loop's pattern is descended from
    calls.clear()
    monkeypatch.setattr(improvement, "_BOTH_CELLS", 10)
    suppress(table, requirements, options=options, seed=2)
    assert len(calls) == 1
