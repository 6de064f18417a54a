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
infeasible or not solved in time. ``c_i`` are the (perturbed) costs; sensitive cells and cells the caller
forces have ``y = 1``, cells that must stay published ``y = 0``.

Size: ``cells * (1 + 2 * sensitive)`` variables, so this is for small and medium
tables (threshold in :mod:`guard.suppression.secondary`). The optimal ``d`` vectors
are returned too: they certify the pattern (:mod:`~guard.suppression.certificates`).
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass

import highspy
import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from guard.highs import lp_model
from guard.suppression.model import Levels
from guard.suppression.table import Table

__all__ = ["CspModel", "OptimalOutcome", "solve_csp", "solve_csp_from", "solve_optimal"]


@dataclass(frozen=True)
class CspModel:
    """The MILP's data over ``n`` columns (cells) and ``m`` relation rows.

    ``levels`` maps column indices of sensitive cells to ``(upper, lower)`` (capped at
    the bounds); ``forced`` columns are withheld, ``kept`` columns published.
    """

    matrix: sparse.csr_matrix
    up_room: np.ndarray
    down_room: np.ndarray
    costs: np.ndarray
    levels: Levels
    forced: Set[int] = frozenset()
    kept: Set[int] = frozenset()


@dataclass(frozen=True)
class OptimalOutcome:
    """Withheld columns; whether HiGHS proved them optimal; and for each sensitive
    column and direction (True = up) the attacker deviation that certifies it."""

    suppressed: frozenset[int]
    proven: bool
    deviations: dict[tuple[int, bool], np.ndarray]


def solve_optimal(
    table: Table,
    levels: Levels,
    costs: np.ndarray,
    *,
    forced: Set[int] = frozenset(),
    kept: Set[int] = frozenset(),
    time_limit: float = 10.0,
) -> OptimalOutcome | None:
    """Solve the MILP over the whole table; None when HiGHS finds no pattern
    (the capped model is infeasible, or time ran out before a first pattern)."""
    a, lb, ub = table.arrays
    model = CspModel(table.matrix, ub - a, a - lb, costs, levels, forced, kept)
    return solve_csp(model, time_limit)


def solve_csp(model: CspModel, time_limit: float) -> OptimalOutcome | None:
    """Solve one :class:`CspModel`; None when no pattern was found."""
    built = _assemble(model)
    if isinstance(built, OptimalOutcome):
        return built
    n = len(model.costs)
    constraints = [LinearConstraint(built.equalities, 0.0, 0.0)]
    if built.links is not None:
        constraints.append(LinearConstraint(built.links, -np.inf, 0.0))
    res = milp(
        built.costs,
        integrality=np.concatenate([np.ones(n), np.zeros(len(built.costs) - n)]),
        bounds=Bounds(built.lower, built.upper),
        constraints=constraints,
        options={"time_limit": time_limit, "disp": False},
    )
    if res.x is None:
        return None
    return built.outcome(res.x, proven=res.status == 0)


def solve_csp_from(
    model: CspModel, start: Set[int], *, node_limit: int, time_limit: float
) -> OptimalOutcome | None:
    """Solve one :class:`CspModel` by HiGHS started from the pattern ``start`` (its
    withheld columns; HiGHS completes the deviations), stopped after ``node_limit``
    branch-and-bound nodes: a limit on work, so the outcome does not depend on the
    machine's load (``time_limit`` is a fail-safe only). None when no pattern was found.
    """
    built = _assemble(model)
    if isinstance(built, OptimalOutcome):
        return built
    n = len(model.costs)
    rows = sparse.vstack([built.equalities] + ([] if built.links is None else [built.links]))
    links = 0 if built.links is None else built.links.shape[0]
    row_lower = np.concatenate([np.zeros(built.equalities.shape[0]), np.full(links, -np.inf)])
    highs = lp_model(rows, built.costs, built.lower, built.upper, row_lower, np.zeros(len(row_lower)))
    highs.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.full(n, highspy.HighsVarType.kInteger))
    highs.setOptionValue("mip_max_nodes", int(node_limit))
    highs.setOptionValue("time_limit", float(time_limit))
    y = np.zeros(n)
    y[sorted(start)] = 1.0
    highs.setSolution(n, np.arange(n, dtype=np.int32), y)
    highs.run()
    if not highs.getInfo().primal_solution_status:
        return None
    x = np.asarray(highs.getSolution().col_value, dtype=np.float64)
    return built.outcome(x, proven=highs.getModelStatus() == highspy.HighsModelStatus.kOptimal)


@dataclass(frozen=True)
class _Assembled:
    """The MILP's columns (``y``, then one deviation vector per block), bounds and rows."""

    costs: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    equalities: sparse.csr_matrix
    #: the linking rows ``±d_i - U_i y_i <= 0`` (None without free cells)
    links: sparse.csr_matrix | None
    blocks: list[tuple[int, float, bool]]
    fixed: frozenset[int]

    def outcome(self, x: np.ndarray, *, proven: bool) -> OptimalOutcome:
        n = len(x) // (1 + len(self.blocks))
        chosen = frozenset(int(i) for i in np.flatnonzero(x[:n] > 0.5)) | self.fixed
        deviations = {(p, up): x[n * (k + 1) : n * (k + 2)] for k, (p, _, up) in enumerate(self.blocks)}
        return OptimalOutcome(chosen, proven=proven, deviations=deviations)


def _assemble(model: CspModel) -> _Assembled | OptimalOutcome:
    """The MILP of ``model``, or its outcome when no level needs a deviation."""
    n = len(model.costs)
    m = model.matrix.shape[0]
    fixed_one = set(model.levels) | set(model.forced)
    kept = sorted(model.kept)
    blocks = [
        (p, level, up)
        for p, lv in model.levels.items()
        for level, up in zip(lv, (True, False), strict=True)
        if level > 0
    ]
    y_lb = np.zeros(n)
    y_ub = np.ones(n)
    y_lb[list(fixed_one)] = 1.0
    y_ub[kept] = 0.0
    free = np.array([i for i in range(n) if i not in fixed_one and i not in model.kept], dtype=int)

    q = len(blocks)
    if q == 0:
        # no cell needs a protection interval (e.g. a sensitive cell whose measure is all
        # NULL has level 0): withholding the fixed cells is the whole, optimal pattern
        return OptimalOutcome(frozenset(fixed_one), proven=True, deviations={})
    eq = sparse.hstack([sparse.csr_matrix((q * m, n)), sparse.block_diag([model.matrix] * q)])
    lo = [y_lb]
    hi = [y_ub]
    links: list[sparse.coo_matrix] = []
    for k, (p, level, upward) in enumerate(blocks):
        cap = max(model.levels[p])
        u = np.minimum(model.up_room, cap)
        d = np.minimum(model.down_room, cap)
        d_lo, d_hi = -d, u.copy()
        d_lo[kept] = 0.0
        d_hi[kept] = 0.0
        if upward:
            d_lo[p] = level
        else:
            d_hi[p] = -level
        lo.append(d_lo)
        hi.append(d_hi)
        links.append(_linking(n, q, k, free, u, d))
    return _Assembled(
        costs=np.concatenate([model.costs, np.zeros(q * n)]),
        lower=np.concatenate(lo),
        upper=np.concatenate(hi),
        equalities=eq.tocsr(),
        links=sparse.vstack(links).tocsr() if links and len(free) else None,
        blocks=blocks,
        fixed=frozenset(fixed_one),
    )


def _linking(n: int, q: int, block: int, free: np.ndarray, u: np.ndarray, d: np.ndarray) -> sparse.coo_matrix:
    """Rows ``d_i - U_i y_i <= 0`` and ``-d_i - D_i y_i <= 0`` for the free cells of one block."""
    f = len(free)
    offset = n * (block + 1)
    rows = np.concatenate([np.arange(f), np.arange(f), f + np.arange(f), f + np.arange(f)])
    cols = np.concatenate([offset + free, free, offset + free, free])
    data = np.concatenate([np.ones(f), -u[free], -np.ones(f), -d[free]])
    return sparse.coo_matrix((data, (rows, cols)), shape=(2 * f, n * (1 + q)))
