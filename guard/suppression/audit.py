"""LP audit: what an attacker can infer about withheld cells from what was published.

For a set ``S`` of withheld cells, the published table fixes every other cell at its
value. An attacker knows the relations ``A x = 0`` and the a-priori bounds, so the
feasibility interval of a withheld cell ``s`` is (seed 004, Definition 2; seed 002 §2.4.8)::

    low_s  = min x_s   s.t.  A x = 0,  x_i = a_i (i not in S),  lb_i <= x_i <= ub_i
    high_s = max x_s   (same constraints)

solved with HiGHS (``scipy.optimize.linprog``). Withheld cells split into independent
components (linked through relations); each LP only spans the component of its cell.
To audit linked tables, audit their :func:`~guard.suppression.table.union` with
:func:`linked_suppressed`: a cell released by any table is known to the attacker.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from guard.arrays import distinct
from guard.suppression.entries import linked_labels, positions
from guard.suppression.model import ProtectionLevels, required_levels
from guard.suppression.table import K, Key, Table

__all__ = ["Failure", "audit", "failures", "linked_suppressed"]


@dataclass(frozen=True)
class Failure:
    """A sensitive cell whose feasibility interval misses its protection levels.

    ``needed_low = a - lower`` and ``needed_high = a + upper`` (levels capped at the
    bounds); the cell is safe when ``low <= needed_low`` and ``high >= needed_high``.
    Internal: holds hidden values, never put it in a message to an analyst.
    """

    key: Key
    low: float
    high: float
    needed_low: float
    needed_high: float


def audit(
    table: Table, suppressed: Iterable[Key], cells: Iterable[Key] | None = None
) -> dict[Key, tuple[float, float]]:
    """Feasibility interval ``(low, high)`` of each withheld cell (or of ``cells`` only).

    ``low`` may be ``-inf`` and ``high`` ``+inf`` where the bounds allow. A cell of
    ``cells`` that is published gets ``(a, a)``.

    Raises:
        ValueError: a key is not in the table, or the published values are
            inconsistent with the relations (the LP is infeasible).
    """
    hidden = sorted({table.index(k) for k in suppressed})
    targets = hidden if cells is None else sorted({table.index(k) for k in cells})
    a = table.arrays[0]
    result: dict[Key, tuple[float, float]] = {}
    hidden_set = set(hidden)
    for t in targets:
        if t not in hidden_set:
            result[table.keys[t]] = (float(a[t]), float(a[t]))
    wanted = {t for t in targets if t in hidden_set}
    if not wanted:
        # no target is withheld (a linked answer without sensitive cells: its view's
        # unreleased cells are withheld, but nobody asked for their intervals): the
        # components below would be labelled only to be skipped, ~0.5 ms of a one-cell answer
        return result
    for members, rows in _components(table, hidden):
        goal = [i for i in members if i in wanted]
        if not goal:
            continue
        intervals = _component_intervals(table, members, rows, goal)
        for i, interval in zip(goal, intervals, strict=True):
            result[table.keys[i]] = interval
    return result


def failures(
    table: Table, suppressed: Iterable[Key], requirements: Mapping[K, ProtectionLevels]
) -> list[Failure]:
    """The sensitive cells whose interval does not reach ``a - lower`` and ``a + upper``.

    A sensitive cell that is not withheld fails with ``low = high = a``. A tolerance of
    ``1e-6 * max(1, |a|, levels)`` absorbs LP round-off.

    Raises:
        ValueError: as :func:`audit` and :func:`~guard.suppression.model.required_levels`.
    """
    levels = required_levels(table, requirements)
    hidden = set(suppressed)
    intervals = audit(table, hidden, cells=[table.keys[i] for i in levels])
    out: list[Failure] = []
    for i, (upper, lower) in levels.items():
        key = table.keys[i]
        a = table.values[i]
        low, high = intervals[key]
        tol = 1e-6 * max(1.0, abs(a), upper, lower)
        needed_low, needed_high = a - lower, a + upper
        if not (low <= needed_low + tol and high >= needed_high - tol):
            out.append(Failure(key, low, high, needed_low, needed_high))
    return out


def linked_suppressed(releases: Iterable[tuple[Table, Iterable[Key]]]) -> frozenset[Key]:
    """Cells still hidden once several releases are combined: withheld in *every*
    release that contains them (one release publishing a cell reveals it)."""
    seen: set[Key] = set()
    published: set[Key] = set()
    for table, withheld in releases:
        hidden = set(withheld)
        for key in table.keys:
            seen.add(key)
            if key not in hidden:
                published.add(key)
    return frozenset(seen - published)


def _components(table: Table, hidden: list[int]) -> list[tuple[list[int], list[int]]]:
    """Withheld cells grouped by the relations that link them, each with the relations
    that touch it (a relation's withheld cells all fall in one group): the connected
    parts (scipy) of the graph of relations and their withheld cells. Groups come in the
    order of their first cell in ``hidden``, relations in their order in the table, so
    the LPs are built the same way every time."""
    csc = table.csc
    cell_label, relation_label = linked_labels(csc, np.asarray(hidden, dtype=np.int64))
    groups: dict[int, tuple[list[int], list[int]]] = {}
    for j, i in enumerate(hidden):
        groups.setdefault(int(cell_label[j]), ([], []))[0].append(i)
    touched = distinct(csc.indices[positions(csc.indptr, np.asarray(hidden, dtype=np.int64))])
    for r in touched.tolist():
        groups[int(relation_label[r])][1].append(r)
    return list(groups.values())


def _component_intervals(
    table: Table, members: list[int], rows: list[int], goal: list[int]
) -> list[tuple[float, float]]:
    a, lb, ub = table.arrays
    if not rows:
        return [(float(lb[i]), float(ub[i])) for i in goal]
    bounds = list(zip(lb[members], ub[members], strict=True))
    position = {i: k for k, i in enumerate(members)}
    sub = table.matrix[rows]
    known = np.ones(len(a), dtype=bool)
    known[members] = False
    # every other cell of these relations is published: withheld cells of other
    # components never share a relation with this one
    rhs = -(sub[:, known] @ a[known])
    a_eq = sparse.csr_matrix(sub[:, members])
    out: list[tuple[float, float]] = []
    for i in goal:
        c = np.zeros(len(members))
        c[position[i]] = 1.0
        try:
            low = _solve(c, a_eq, rhs, bounds)
            high = -_solve(-c, a_eq, rhs, bounds)
        except ValueError:
            low, high = _scaled(c, a_eq, rhs, bounds)
        out.append((low, high))
    return out


def _scaled(
    c: np.ndarray, a_eq: sparse.csr_matrix, rhs: np.ndarray, bounds: list[tuple[float, float]]
) -> tuple[float, float]:
    """The interval of ``c x`` on the problem divided by its largest right-hand side.
    HiGHS's feasibility tolerance is absolute (1e-7): published sums of billions carry
    a rounding residue above it, and the unscaled LP reads as infeasible. Scaled, the
    residue is within tolerance, and so is the error of the optimum, up to 1e-7 of the
    scale: the interval is narrowed by ten times that, so that it is never reported
    wider than it is."""
    scale = max(1.0, float(np.abs(rhs).max(initial=0.0)))
    shrunk = [(lo / scale, hi / scale) for lo, hi in bounds]
    low = _solve(c, a_eq, rhs / scale, shrunk) * scale
    high = -_solve(-c, a_eq, rhs / scale, shrunk) * scale
    margin = 1e-6 * scale
    return low + margin, max(low + margin, high - margin)


def _solve(
    c: np.ndarray, a_eq: sparse.csr_matrix, rhs: np.ndarray, bounds: list[tuple[float, float]]
) -> float:
    res = linprog(c, A_eq=a_eq, b_eq=rhs, bounds=bounds, method="highs")
    if res.status == 3:  # unbounded
        return -math.inf
    if res.status != 0:
        raise ValueError(f"audit LP failed ({res.message}); published values inconsistent with relations")
    return float(res.fun)
