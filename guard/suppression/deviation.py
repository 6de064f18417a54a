"""The cheapest attacker deviation that moves one cell by a given amount, by LP.

For a cell ``p``, a level ``L`` and a direction (up here)::

    min  Σ_i c_i (d+_i + d-_i)
    s.t. A (d+ - d-) = 0
         0 <= d+_i <= ub_i - a_i,   0 <= d-_i <= a_i - lb_i      (0 for kept cells)
         d+_p >= L,  d-_p = 0

``a + d`` is then a table consistent with everything published except the support of
``d``: withholding that support lets an attacker's interval for ``p`` reach ``a_p + L``.

Solved by column generation so the LP stays small on large tables. It starts on a box
around ``p``: per dimension j, ``p``'s own category, TOTAL, and the cheapest other
categories along ``p``'s line in j, as many as keep the box near ``_BOX`` cells, plus
the cells already withheld (free to reuse). The box holds the
hypercube patterns (p, its partners and the totals above it), so a deviation usually
exists at once. Only when it
does not, phase 1 adds the cells with the most negative reduced cost of the
infeasibility LP until one does; phase 2 adds cells priced by the duals of the cost LP
until none would lower the cost (or a round limit is hit). Without a round limit the
result is an optimum of the LP over all cells.

The heuristic asks thousands of these LPs of a few hundred columns each (2,506 on
bench_core's q12), so each is built on its own columns only: bounds gathered there from
the table's rooms, the deviation returned as those columns' moves
(:func:`cheapest_moves`); vectors over every cell of the table are made only when
pricing needs them. The LP HiGHS receives is the same, array for array, as the one
built from such vectors (tests/suppression/test_heuristic_reference.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping, Set
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse

from guard.highs import LpResult, LpSolver, LpStatus, solve_lp
from guard.suppression.entries import entries, paired_arrays, submatrix, submatrix_arrays
from guard.suppression.table import TOTAL, Key, Table

__all__ = ["DeviationProblem", "cheapest_deviation", "cheapest_moves"]

#: most cells added to a restricted LP per pricing round
_BATCH = 128
#: about how many cells the starting box holds
_BOX = 256


@dataclass(frozen=True)
class DeviationProblem:
    """The parts of a table that every deviation LP of one run shares."""

    csr: sparse.csr_matrix
    csc: sparse.csc_matrix
    up_room: np.ndarray
    down_room: np.ndarray
    kept: np.ndarray
    parents: dict[int, list[int]] = field(repr=False)
    keys: Mapping[Key, int] = field(repr=False)
    #: per (cell, dimension): the other cells of the cell's line in that dimension
    lines: dict[tuple[Key, int], list[int]] = field(repr=False)
    cell_keys: tuple[Key, ...] = field(repr=False)
    #: ``up_room`` / ``down_room`` with the kept cells at 0: every LP's bounds on d+ / d-
    #: (but at the cell it moves)
    up_free: np.ndarray = field(repr=False)
    down_free: np.ndarray = field(repr=False)
    #: ``lines`` as arrays, filled as the boxes need them
    line_arrays: dict[tuple[Key, int], np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    #: per relation, the relations its cells are in (``_reach``), filled as boxes need them
    reaches: dict[int, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    #: one HiGHS instance for every LP of the run (one thread: the heuristic's), without
    #: presolve: on these LPs (a few relations, hundreds of cells) presolve solved each
    #: outright and its postsolve returned a point that moved every free cell of the
    #: relations (151 cells a deviation on bench_core's q12), twice as slow as the one
    #: or two simplex pivots from the slack basis, whose vertex moves a handful (2 on
    #: q12) and so proves more levels per deviation (2,506 LPs there instead of 2,841)
    solver: LpSolver = field(default_factory=lambda: LpSolver(presolve=False), repr=False, compare=False)

    @classmethod
    def of(cls, table: Table, kept: Set[int]) -> DeviationProblem:
        a, lb, ub = table.arrays
        up_room, down_room = ub - a, a - lb
        fixed = np.array(sorted(kept), dtype=int)
        up_free, down_free = up_room.copy(), down_room.copy()
        up_free[fixed] = 0.0
        down_free[fixed] = 0.0
        # the table's own structures, built once per table and shared read-only
        return cls(
            csr=table.matrix,
            csc=table.csc,
            up_room=up_room,
            down_room=down_room,
            kept=fixed,
            parents=table.parents,
            keys=table.position,
            lines=table.lines,
            cell_keys=table.keys,
            up_free=up_free,
            down_free=down_free,
        )

    def start(
        self,
        p: int,
        costs: np.ndarray,
        hidden: Set[int] = frozenset(),
        distant: bool = True,
        hidden_ids: np.ndarray | None = None,
    ) -> np.ndarray:
        """``p``, the cells sharing a relation with it, its ancestors, the box of its
        category, TOTAL and the cheapest others in every dimension (by ``costs``), about
        ``_BOX`` cells in all, and the ``hidden`` cells, free to reuse: all of them when
        ``distant`` (a cycle through a far withheld cell is often the cheapest), else
        those sharing a relation with the rest (smaller LPs, more suppression).
        ``hidden_ids``: the same cells as an array, when the caller keeps one (the heuristic
        asks thousands of LPs with one growing set: rebuilding it each time cost more than
        the rest of the box). Sorted and unique, as every set operation here returns."""
        rows = self.csc.indices[self.csc.indptr[p] : self.csc.indptr[p + 1]]
        seen = {p}
        stack = [p]
        while stack:
            for parent in self.parents.get(stack.pop(), ()):
                if parent not in seen:
                    seen.add(parent)
                    stack.append(parent)
        key = self.cell_keys[p]
        width = max(1, round(_BOX ** (1 / max(1, len(key)))) - 2)
        choices: list[set[Hashable]] = []
        for j in range(len(key)):
            line = self._line((*key[:j], None, *key[j + 1 :]), j)
            # a stable sort by cost (the order Python's list.sort gave) of the line without
            # p: the whole line's, p taken out (the others keep their order), so the
            # first ``width`` of them are among the first ``width + 1`` of the line
            first = line[np.argsort(costs[line], kind="stable")[: width + 1]].tolist()
            cheapest = [i for i in first if i != p][:width]
            choices.append({key[j], TOTAL, *(self.cell_keys[i][j] for i in cheapest)})
        box = (self.keys.get(k) for k in itertools.product(*choices))
        seen.update(i for i in box if i is not None)
        # sets of cells as masks over the table: sorted and unique when read back, as
        # union1d / unique return them, without a sort per LP
        member = np.zeros(len(self.up_room), dtype=bool)
        member[entries(self.csr, rows)] = True
        others = np.fromiter(seen, dtype=np.int64, count=len(seen))
        member[others] = True
        if not hidden:
            return np.flatnonzero(member)
        if hidden_ids is None:
            hidden_ids = np.fromiter(hidden, dtype=int, count=len(hidden))
        if distant:
            member[hidden_ids] = True
            return np.flatnonzero(member)
        # the relations of every cell so far: those the cells of p's relations are in
        # (kept per relation), and those of p's ancestors and box
        related = np.zeros(self.csr.shape[0], dtype=bool)
        for row in rows.tolist():
            related[self._reach(row)] = True
        related[entries(self.csc, others)] = True
        near = entries(self.csr, np.flatnonzero(related))
        mask = np.zeros(len(self.up_room), dtype=bool)
        mask[hidden_ids] = True
        member[near[mask[near]]] = True
        return np.flatnonzero(member)

    def _reach(self, row: int) -> np.ndarray:
        """The relations that the cells of relation ``row`` are in (repeats kept), made
        once per relation."""
        found = self.reaches.get(row)
        if found is None:
            found = self.reaches[row] = entries(self.csc, entries(self.csr, np.array([row])))
        return found

    def _line(self, blanked: Key, j: int) -> np.ndarray:
        """The cells of a line (``lines``) as an array, made once per line."""
        found = self.line_arrays.get((blanked, j))
        if found is None:
            found = self.line_arrays[(blanked, j)] = np.array(self.lines[(blanked, j)], dtype=np.int64)
        return found


class _Bounds:
    """The bounds of one deviation LP (``p`` moved by ``level`` up or down): on the
    columns of a restricted LP, or over the whole table when pricing needs them."""

    def __init__(self, problem: DeviationProblem, p: int, level: float, upward: bool) -> None:
        self._problem, self._p, self._level, self._upward = problem, p, level, upward
        self._full: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    def full(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(lo_plus, hi_plus, lo_minus, hi_minus)``, one entry per cell."""
        if self._full is None:
            n, p, level = len(self._problem.up_free), self._p, self._level
            hi_plus, hi_minus = self._problem.up_free.copy(), self._problem.down_free.copy()
            lo_plus, lo_minus = np.zeros(n), np.zeros(n)
            if self._upward:
                lo_plus[p], hi_minus[p] = level, 0.0
            else:
                lo_minus[p], hi_plus[p] = level, 0.0
            self._full = (lo_plus, hi_plus, lo_minus, hi_minus)
        return self._full

    def restricted(self, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The lower and upper bounds of d+ then d- on ``columns`` (sorted): the entries
        of :meth:`full` there, gathered from the table's rooms without a vector per cell
        of the table."""
        k = len(columns)
        lower = np.zeros(2 * k)
        upper = np.concatenate([self._problem.up_free[columns], self._problem.down_free[columns]])
        at = int(np.searchsorted(columns, self._p))
        if at < k and columns[at] == self._p:
            move, still = (at, k + at) if self._upward else (k + at, at)
            lower[move], upper[still] = self._level, 0.0
        return lower, upper


def cheapest_deviation(
    problem: DeviationProblem,
    costs: np.ndarray,
    p: int,
    level: float,
    upward: bool,
    *,
    hidden: Set[int] = frozenset(),
    distant: bool = True,
    rounds: int | None = None,
    hidden_ids: np.ndarray | None = None,
) -> np.ndarray | None:
    """The cheapest deviation moving cell ``p`` by ``level`` up (or down); None when no
    deviation within the bounds can.

    ``costs`` are per unit of deviation (0 for cells already withheld); the ``hidden``
    cells join the starting box (only those near it unless ``distant``). ``rounds``
    caps the pricing rounds once the LP is feasible: the deviation returned is then
    valid but may not be the cheapest (None: price until it is the cheapest overall).
    ``hidden_ids``: ``hidden`` as an array, when the caller keeps one."""
    found = cheapest_moves(
        problem, costs, p, level, upward, hidden=hidden, distant=distant, rounds=rounds, hidden_ids=hidden_ids
    )
    if found is None:
        return None
    deviation = np.zeros(len(costs))
    deviation[found[0]] = found[1]
    return deviation


def cheapest_moves(
    problem: DeviationProblem,
    costs: np.ndarray,
    p: int,
    level: float,
    upward: bool,
    *,
    hidden: Set[int] = frozenset(),
    distant: bool = True,
    rounds: int | None = None,
    hidden_ids: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`cheapest_deviation` as the cells of its last restricted LP (sorted) and
    each one's move (0 for most): every other cell's is 0. The heuristic's form (no
    vector per cell of the table for an LP of a few hundred columns)."""
    # HiGHS reports "numerical difficulties" on costs of magnitude-weighted cells (1e9
    # next to 0 for withheld ones); the cheapest deviation is the same on any scale
    top = float(costs.max(initial=0.0))
    if top > 0:
        costs = costs / top
    # every cell's room is >= 0 (a table's values lie within its bounds), so the only
    # bound that can cross is p's own: then no deviation can move it so far
    if (problem.up_free if upward else problem.down_free)[p] < level:
        return None
    bounds = _Bounds(problem, p, level, upward)
    columns = problem.start(p, costs, hidden, distant, hidden_ids)
    done = 0
    zero = np.zeros(len(costs))
    tol = 1e-7 * max(1.0, level)
    res, rows = _restricted(problem, columns, costs, bounds, slack=False)
    while res.status is not LpStatus.OPTIMAL:  # phase 1, only when the start admits no deviation
        if res.status is not LpStatus.INFEASIBLE:  # the solver failed
            return None
        res, rows = _restricted(problem, columns, zero, bounds, slack=True)
        if res.status is not LpStatus.OPTIMAL:
            return None
        if res.objective <= tol:  # feasible up to round-off: keep this deviation
            rounds = 0
            break
        added = _price(problem, columns, rows, res.row_duals, zero, costs, bounds.full())
        if not len(added):
            return None
        columns = np.union1d(columns, added)
        res, rows = _restricted(problem, columns, costs, bounds, slack=False)
    while True:  # phase 2: price cheaper cells in
        if rounds is not None and done >= rounds:
            break
        done += 1
        added = _price(problem, columns, rows, res.row_duals, costs, costs, bounds.full())
        if not len(added):
            break
        columns = np.union1d(columns, added)
        res, rows = _restricted(problem, columns, costs, bounds, slack=False)
        if res.status is not LpStatus.OPTIMAL:
            return None
    k = len(columns)
    return columns, res.x[:k] - res.x[k : 2 * k]


def _restricted(
    problem: DeviationProblem, columns: np.ndarray, c: np.ndarray, bounds: _Bounds, *, slack: bool
) -> tuple[LpResult, np.ndarray]:
    """The LP over ``columns`` and the relations they touch; with ``slack``, the phase-1
    LP minimising the violation of ``A d = 0``."""
    if not slack:
        # the common case, thousands of times a run: arrays straight to the kept solver
        indptr, indices, data, rows = submatrix_arrays(problem.csc, columns)
        paired = paired_arrays(indptr, indices, data)
        cost = c[columns]
        res = problem.solver.solve(
            np.concatenate([cost, cost]),
            (*paired, len(rows)),
            np.zeros(len(rows)),
            *bounds.restricted(columns),
        )
        return res, rows
    lo_plus, hi_plus, lo_minus, hi_minus = bounds.full()
    part, rows = submatrix(problem.csc, columns)
    eye = sparse.identity(len(rows), format="csc")
    res = solve_lp(
        np.concatenate([np.zeros(len(columns))] * 2 + [np.ones(len(rows))] * 2),
        sparse.hstack([part, -part, eye, -eye], format="csc"),
        np.zeros(len(rows)),
        np.concatenate([lo_plus[columns], lo_minus[columns], np.zeros(len(rows)), np.zeros(len(rows))]),
        np.concatenate([hi_plus[columns], hi_minus[columns], np.full(2 * len(rows), np.inf)]),
    )
    return res, rows


def _price(
    problem: DeviationProblem,
    columns: np.ndarray,
    rows: np.ndarray,
    duals: np.ndarray,
    c: np.ndarray,
    tiebreak: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> np.ndarray:
    """Cells outside ``columns`` whose deviation has a negative reduced cost
    ``c_i -/+ (A^T y)_i``; at most ``_BATCH``, most negative (then cheapest) first.
    Relations outside the restricted LP get dual 0, a valid optimal dual for it."""
    y = np.zeros(problem.csc.shape[0])
    y[rows] = duals
    aty = problem.csr.T @ y
    _, hi_plus, _, hi_minus = bounds
    rc = np.minimum(np.where(hi_plus > 0, c - aty, np.inf), np.where(hi_minus > 0, c + aty, np.inf))
    rc[columns] = np.inf
    scale = max(1.0, float(np.abs(aty).max(initial=0.0)), float(c.max(initial=0.0)))
    candidates = np.flatnonzero(rc < -1e-9 * scale)
    if len(candidates) > _BATCH:
        order = np.lexsort((tiebreak[candidates], rc[candidates]))
        candidates = candidates[order[:_BATCH]]
    return candidates
