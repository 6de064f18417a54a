"""The classic cell suppression MILP (seed 000; Fischetti & Salazar), solved by HiGHS.

Variables: ``y_i in {0, 1}`` (cell i withheld), and for each sensitive cell ``p`` two
attacker deviation vectors ``d^{u,p}``, ``d^{l,p}`` (how far the attacker can move
every cell while staying consistent with the release)::

    min  Σ_i c_i y_i
    s.t. A d^{u,p} = 0,   -D_i y_i <= d^{u,p}_i <= U_i y_i,   d^{u,p}_p >= upl_p
         A d^{l,p} = 0,   -D_i y_i <= d^{l,p}_i <= U_i y_i,   d^{l,p}_p <= -lpl_p

for every sensitive p, with ``U_i = min(ub_i - a_i, L_p)``, ``D_i = min(a_i - lb_i, L_p)``
and ``L_p = max(upl_p, lpl_p)``. Seed 000 uses the full ranges ``ub_i - a_i`` and
``a_i - lb_i``; capping them at the level being protected keeps the big-M constants
small (a much tighter LP relaxation, and finite when ``ub = +inf``). The cap is safe:
it only shrinks the deviations the model may use, so every pattern it accepts is
accepted by the true-bounds audit. It may miss a cheaper pattern that needs larger
deviations elsewhere; the caller falls back to the heuristic when the model is
infeasible. ``c_i`` are the (perturbed) costs; sensitive cells and cells the caller
forces have ``y = 1``, cells that must stay published ``y = 0``.

Size: ``cells * (1 + 2 * sensitive)`` variables, so this is for small and medium
tables; see :mod:`guard.suppression.secondary` for the threshold.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from guard.suppression.model import Levels
from guard.suppression.table import Table

__all__ = ["OptimalOutcome", "solve_optimal"]


@dataclass(frozen=True)
class OptimalOutcome:
    """Withheld cell indices, and whether HiGHS proved them optimal."""

    suppressed: frozenset[int]
    proven: bool


def solve_optimal(
    table: Table,
    levels: Levels,
    costs: np.ndarray,
    *,
    forced: Set[int] = frozenset(),
    kept: Set[int] = frozenset(),
    time_limit: float = 10.0,
) -> OptimalOutcome | None:
    """Solve the MILP; None when HiGHS finds no pattern (infeasible, or time out).

    ``levels`` maps each sensitive cell index to ``(upper, lower)`` (already capped at
    the bounds); ``forced`` cells are withheld, ``kept`` cells published.
    """
    a, lb, ub = table.arrays
    n = len(a)
    up_room = ub - a
    down_room = a - lb
    fixed_one = set(levels) | set(forced)
    blocks: list[tuple[int, float, bool]] = []  # (cell, level, upward)
    for p, (upper, lower) in levels.items():
        if upper > 0:
            blocks.append((p, upper, True))
        if lower > 0:
            blocks.append((p, lower, False))

    y_lb = np.zeros(n)
    y_ub = np.ones(n)
    y_lb[list(fixed_one)] = 1.0
    y_ub[list(kept)] = 0.0
    free = np.array([i for i in range(n) if i not in fixed_one and i not in kept], dtype=int)

    q = len(blocks)
    eq = sparse.hstack(
        [sparse.csr_matrix((q * table.matrix.shape[0], n)), sparse.block_diag([table.matrix] * q)]
    )
    lo = [y_lb]
    hi = [y_ub]
    link_rows: list[sparse.coo_matrix] = []
    for k, (p, level, upward) in enumerate(blocks):
        cap = max(levels[p])
        u = np.minimum(up_room, cap)
        d = np.minimum(down_room, cap)
        d_lo, d_hi = -d.copy(), u.copy()
        d_lo[list(kept)] = 0.0
        d_hi[list(kept)] = 0.0
        if upward:
            d_lo[p] = level
        else:
            d_hi[p] = -level
        lo.append(d_lo)
        hi.append(d_hi)
        link_rows.append(_linking(n, q, k, free, u, d))

    c = np.concatenate([costs, np.zeros(q * n)])
    constraints = [LinearConstraint(eq, 0.0, 0.0)]
    if link_rows and len(free):
        link = sparse.vstack(link_rows).tocsr()
        constraints.append(LinearConstraint(link, -np.inf, 0.0))
    integrality = np.concatenate([np.ones(n), np.zeros(q * n)])
    res = milp(
        c,
        integrality=integrality,
        bounds=Bounds(np.concatenate(lo), np.concatenate(hi)),
        constraints=constraints,
        options={"time_limit": time_limit, "disp": False},
    )
    if res.x is None:
        return None
    y = res.x[:n]
    chosen = frozenset(int(i) for i in np.flatnonzero(y > 0.5)) | frozenset(fixed_one)
    return OptimalOutcome(chosen, proven=res.status == 0)


def _linking(n: int, q: int, block: int, free: np.ndarray, u: np.ndarray, d: np.ndarray) -> sparse.coo_matrix:
    """Rows ``d_i - U_i y_i <= 0`` and ``-d_i - D_i y_i <= 0`` for the free cells of one block."""
    f = len(free)
    offset = n * (block + 1)
    rows = np.concatenate([np.arange(f), np.arange(f), f + np.arange(f), f + np.arange(f)])
    cols = np.concatenate([offset + free, free, offset + free, free])
    data = np.concatenate([np.ones(f), -u[free], -np.ones(f), -d[free]])
    return sparse.coo_matrix((data, (rows, cols)), shape=(2 * f, n * (1 + q)))
