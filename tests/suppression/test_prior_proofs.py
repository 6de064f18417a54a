"""Proofs carried from one pattern to the next (``suppress(prior=...)``): a linked
answer re-checks the deviations that proved the last pattern over the same cells and
solves LPs only for the levels they do not cover. Every pattern is audited by the LP
written in ``test_redundancy.py`` (scipy, the declared bounds), never by the guard."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import guard.suppression.heuristic as heuristic
from guard.suppression import Method, Protection, SuppressionOptions, Table, suppress
from tests.suppression.test_redundancy import problem, protected

CubeTable = Callable[[np.ndarray], Table]
HEURISTIC = SuppressionOptions(method=Method.HEURISTIC, perturbation=0.5)


def _requirements(table: Table, levels: dict[int, tuple[float, float]]) -> dict[object, Protection]:
    return {table.keys[p]: Protection(*lv) for p, lv in levels.items()}


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = heuristic.cheapest_moves

    def counting(*args: object, **kwargs: object) -> tuple[np.ndarray, np.ndarray] | None:
        calls.append(1)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(heuristic, "cheapest_moves", counting)
    return calls


@pytest.mark.parametrize(("shape", "seed"), [((8, 8), 0), ((4, 4, 3), 1)])
def test_the_same_problem_again_reuses_every_proof(
    cube_table: CubeTable, shape: tuple[int, ...], seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    table, levels = problem(cube_table, shape, seed)
    requirements = _requirements(table, levels)
    calls = _counted(monkeypatch)
    first = suppress(table, requirements, options=HEURISTIC, seed=seed)
    solved = len(calls)
    assert solved > 0 and first.proofs
    # the next answer keeps what the first withheld (forced), as a linked answer does
    again = suppress(
        table, requirements, options=HEURISTIC, seed=seed, forced=first.suppressed, prior=first.proofs
    )
    assert len(calls) == solved  # no LP: every level was covered by an adopted proof
    assert again.suppressed == first.suppressed
    withheld = {table.index(k) for k in again.suppressed}
    assert protected(table, withheld, levels)


def test_a_proof_through_a_published_cell_is_not_adopted(cube_table: CubeTable) -> None:
    """The next problem publishes a cell the old proofs move: they prove nothing there,
    LPs run again, and the new pattern still passes the independent audit."""
    table, levels = problem(cube_table, (8, 8), 3)
    requirements = _requirements(table, levels)
    first = suppress(table, requirements, options=HEURISTIC, seed=3)
    moved = {key for proof in first.proofs for key in proof} - set(requirements)
    published = sorted(moved, key=repr)[:1]
    assert published
    again = suppress(table, requirements, options=HEURISTIC, seed=3, kept=published, prior=first.proofs)
    assert not set(published) & again.suppressed
    withheld = {table.index(k) for k in again.suppressed}
    assert protected(table, withheld, levels)


def test_proofs_of_other_values_are_not_adopted(
    cube_table: CubeTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Proofs from a table whose values differ break its relations here: rejected by
    the exact check, so the LPs run as without them."""
    table, levels = problem(cube_table, (8, 8), 4)
    requirements = _requirements(table, levels)
    first = suppress(table, requirements, options=HEURISTIC, seed=4)
    skewed = [{k: 1.7 * v if i == 0 else v for i, (k, v) in enumerate(p.items())} for p in first.proofs]
    calls = _counted(monkeypatch)
    suppress(table, requirements, options=HEURISTIC, seed=4, forced=first.suppressed)
    fresh = len(calls)
    calls.clear()
    again = suppress(table, requirements, options=HEURISTIC, seed=4, forced=first.suppressed, prior=skewed)
    assert len(calls) == fresh
    assert protected(table, {table.index(k) for k in again.suppressed}, levels)
