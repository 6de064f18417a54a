"""Fast complementary suppression for large tables: one cheapest-deviation LP per
sensitive cell and direction (in the spirit of Castro's network-flow heuristic, but on
the generic relations ``A x = 0``, so it also serves 3-D and hierarchical tables).

For each sensitive cell ``p``, largest protection first, and each direction with a
positive level ``L``: find the cheapest deviation ``d`` that moves ``p`` by ``L``
(:func:`~guard.suppression.deviation.cheapest_deviation`, with cost 0 on cells
already withheld, so cycles found for earlier cells are reused) and withhold its
support. ``a + d`` is then a table consistent with the release in which ``p`` sits
``L`` away, so the audit interval of ``p`` reaches that far, and withholding more cells
later can only widen it. Each deviation is kept as a certificate: when an earlier
deviation, scaled (and possibly reversed), already moves ``p`` far enough within the
bounds, no LP is needed for that direction.
"""

from __future__ import annotations

from collections.abc import Set

import numpy as np

from guard.suppression.deviation import DeviationProblem, cheapest_deviation
from guard.suppression.model import Levels, ProtectionInfeasible
from guard.suppression.table import Table

__all__ = ["solve_heuristic"]

#: a deviation is a certificate over its support: (cell indices, deviations)
_Certificate = tuple[np.ndarray, np.ndarray]


def solve_heuristic(
    table: Table,
    levels: Levels,
    costs: np.ndarray,
    *,
    suppressed: Set[int] = frozenset(),
    kept: Set[int] = frozenset(),
) -> frozenset[int]:
    """Withheld cell indices: ``suppressed``, every sensitive cell, and the
    complementary cells the deviation LPs pick.

    Raises:
        ProtectionInfeasible: a sensitive cell cannot reach a protection level even
            with every cell other than ``kept`` withheld.
    """
    problem = DeviationProblem.of(table, kept)
    hidden = set(suppressed) | set(levels)
    found: list[_Certificate] = []
    by_cell: dict[int, list[int]] = {}
    for p in sorted(levels, key=lambda p: (-max(levels[p]), p)):
        for level, upward in zip(levels[p], (True, False), strict=True):
            if level <= 0 or _covered(problem, found, by_cell.get(p, ()), p, level, upward):
                continue
            c = costs.copy()
            c[list(hidden)] = 0.0
            deviation = cheapest_deviation(problem, c, p, level, upward)
            if deviation is None:
                raise ProtectionInfeasible(
                    f"sensitive cell {table.keys[p]!r} cannot be given its protection levels even "
                    "with every other cell withheld; widen the bounds or lower the levels"
                )
            support = np.flatnonzero(np.abs(deviation) > 1e-9 * max(1.0, level))
            hidden.update(int(i) for i in support)
            for i in support:
                by_cell.setdefault(int(i), []).append(len(found))
            found.append((support, deviation[support]))
    return frozenset(hidden)


def _covered(
    problem: DeviationProblem,
    found: list[_Certificate],
    candidates: list[int] | tuple[()],
    p: int,
    level: float,
    upward: bool,
) -> bool:
    """Whether a deviation found earlier, scaled to move ``p`` by ``level`` in the
    wanted direction, stays within every cell's bounds (its support is withheld)."""
    for k in candidates:
        support, values = found[k]
        at_p = float(values[np.searchsorted(support, p)])
        scaled = values * ((level if upward else -level) / at_p)
        slack = 1e-9 * max(1.0, level)
        if np.all(scaled <= problem.up_room[support] + slack) and np.all(
            -scaled <= problem.down_room[support] + slack
        ):
            return True
    return False
