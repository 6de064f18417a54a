"""Certificates: attacker deviations that prove a sensitive cell's protection.

A deviation ``d`` with ``A d = 0``, ``lb - a <= d <= ub - a`` and ``d_i = 0`` for every
published cell is a point ``a + d`` of the audit LP's feasible set (seed 004, Def. 2).
If ``d_p >= upl_p`` the audit interval of ``p`` reaches ``a_p + upl_p``; a deviation
scaled by ``0 < s`` stays a deviation when ``s * d`` remains within the bounds, and
``-d`` is one when the bounds allow. So each deviation a solver finds, checked here
exactly (up to round-off), proves protection without solving the audit LP, and may
prove it for other sensitive cells it happens to move as well. A cell published after
all (redundancy elimination) withdraws every deviation that moves it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Set

import numpy as np
from scipy import sparse

from guard.suppression.entries import column_product
from guard.suppression.table import Key, Table

__all__ = ["Certificates"]

#: relative round-off accepted in ``A d = 0`` and in the bounds
_TOL = 1e-7


class Certificates:
    """Verified deviations, indexed by the cells they move."""

    def __init__(self, table: Table, watch: Set[int] = frozenset()) -> None:
        """``watch``: cells whose presence in each deviation is remembered, so that
        :meth:`covers` can skip the deviations moving some of them at once (e.g. the
        single-contributor cells an insider knows)."""
        a, lb, ub = table.arrays
        self._columns: sparse.csc_matrix = table.csc
        self._up = ub - a
        self._down = a - lb
        self._watch = frozenset(watch)
        self._found: list[tuple[np.ndarray, np.ndarray]] = []
        self._touch: list[frozenset[int]] = []
        #: per deviation: how far it may be scaled up and reversed within the bounds
        self._reach: list[tuple[float, float]] = []
        self._by_cell: defaultdict[int, list[int]] = defaultdict(list)
        #: deviations through a cell published after all (they prove nothing any more)
        self._withdrawn: set[int] = set()

    def add(self, cells: np.ndarray, deviation: np.ndarray, hidden: Set[int]) -> bool:
        """Keep the deviation ``deviation[k]`` of cell ``cells[k]`` if it is valid for the
        withheld cells ``hidden``; entries below round-off are dropped. Returns whether
        it was kept."""
        magnitude = np.abs(deviation)
        scale = float(magnitude.max(initial=0.0))
        if scale == 0:
            return False
        mask = magnitude > 1e-9 * max(1.0, scale)
        support = np.asarray(cells)[mask]
        values = deviation[mask]
        # sorted already when it comes from an LP's columns (the heuristic's, thousands
        # a run): the sort would be the identity there
        if len(support) > 1 and not (support[1:] > support[:-1]).all():
            order = np.argsort(support)
            support, values = support[order], values[order]
        tol = _TOL * max(1.0, scale)
        moved = support.tolist()  # Python ints: membership tests without a loop in Python
        if not all(map(hidden.__contains__, moved)):
            return False
        up, down = self._up[support], self._down[support]
        if np.any(values > up + tol) or np.any(-values > down + tol):
            return False
        if np.abs(column_product(self._columns, support, values)).max(initial=0.0) > tol:
            return False
        self._keep(support, values, moved, (up, down))
        return True

    def _keep(
        self,
        support: np.ndarray,
        values: np.ndarray,
        moved: list[int] | None = None,
        rooms: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """Index a checked deviation; ``moved`` its cells as Python ints and ``rooms`` the
        room up and down of each, when the caller has them already."""
        # a deviation may move thousands of cells: index them through Python ints
        # (``moved``, support.tolist()), not numpy scalars one by one
        moved = support.tolist() if moved is None else moved
        number = len(self._found)
        by_cell = self._by_cell
        for i in moved:
            by_cell[i].append(number)
        self._found.append((support, values))
        watched = self._watch.intersection(moved) if self._watch else frozenset()
        self._touch.append(frozenset(watched))
        up, down = (self._up[support], self._down[support]) if rooms is None else rooms
        # room in the direction each cell moves, and in the opposite one
        rising, size = values > 0, np.abs(values)
        ahead = np.where(rising, up, down) / size
        behind = np.where(rising, down, up) / size
        self._reach.append((float(ahead.min(initial=np.inf)), float(behind.min(initial=np.inf))))

    def covers(self, p: int, level: float, upward: bool, avoid: Set[int] = frozenset()) -> bool:
        """Whether a kept deviation, scaled to move ``p`` by ``level`` up (or down), stays
        within every cell's bounds: then ``p``'s audit interval reaches that far.

        ``avoid``: only deviations that move none of these cells count (e.g. an
        insider's own cells, which she knows: a deviation that leaves them in place is
        one she cannot rule out either; or a cell about to be published)."""
        return level <= 0 or self.witness(p, level, upward, avoid=avoid) is not None

    def witness(self, p: int, level: float, upward: bool, *, avoid: Set[int] = frozenset()) -> int | None:
        """Number of a kept deviation that :meth:`covers` ``p`` by ``level``, or None."""
        watched = avoid <= self._watch
        # unwatched cells to avoid (few: e.g. the cell the pruning is about to publish):
        # the deviations moving one of them, from the index by cell (the same test as a
        # search of each deviation's support, without one per deviation)
        through: set[int] = set()
        if avoid and not watched:
            for cell in avoid:
                through.update(self._by_cell.get(cell, ()))
        for k in self._by_cell.get(p, ()):
            if k in self._withdrawn or k in through:
                continue
            if avoid and watched and not self._touch[k].isdisjoint(avoid):
                continue
            support, values = self._found[k]
            # the deviation scaled by t moves p by level: t within its reach (up to
            # round-off) keeps every cell within its bounds
            t = (level if upward else -level) / float(values[np.searchsorted(support, p)])
            forward, backward = self._reach[k]
            if abs(t) <= (forward if t > 0 else backward) * (1 + _TOL):
                return k
        return None

    def deviations(self, within: Set[int] | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
        """Every kept deviation not withdrawn (and moving only cells of ``within``, the
        proofs for a pattern that withholds them): (cells it moves, sorted; their moves)."""
        found = [d for k, d in enumerate(self._found) if k not in self._withdrawn]
        if within is None:
            return found
        mask = np.zeros(len(self._up), dtype=bool)
        mask[list(within)] = True
        return [(support, values) for support, values in found if mask[support].all()]

    def moves(self, k: int) -> np.ndarray:
        """The cells deviation number ``k`` moves (sorted)."""
        return self._found[k][0]

    def adopt(self, table: Table, prior: Iterable[Mapping[Key, float]], hidden: Set[int]) -> None:
        """Keep the ``prior`` deviations (by cell key, e.g. those that proved an earlier
        answer's pattern) that are deviations of ``table`` moving only ``hidden`` cells:
        each is checked as :meth:`add` checks it (``A d = 0`` on every relation of this
        table, the bounds), so one from an earlier view proves nothing here unless it
        still holds."""
        position = table.position
        for deviation in prior:
            try:  # positions looked up in C: a proof may move thousands of cells
                cells = np.fromiter(
                    map(position.__getitem__, deviation), dtype=np.int64, count=len(deviation)
                )
            except KeyError:
                continue  # it moves a cell this table does not hold
            self.add(cells, np.fromiter(deviation.values(), dtype=np.float64, count=len(deviation)), hidden)

    def touched(self, k: int) -> frozenset[int]:
        """The watched cells deviation number ``k`` moves."""
        return self._touch[k]

    def withdraw(self, cell: int) -> None:
        """``cell`` is published after all: the deviations that move it prove nothing."""
        self._withdrawn.update(self._by_cell.get(cell, ()))

    def proven(self, p: int, levels: tuple[float, float], avoid: Set[int] = frozenset()) -> bool:
        """Both of ``p``'s protection levels ``(upper, lower)`` are covered (by
        deviations that leave ``avoid`` in place, see :meth:`covers`)."""
        upper, lower = levels
        return self.covers(p, upper, True, avoid) and self.covers(p, lower, False, avoid)

    def absorb(self, other: Certificates) -> None:
        """Keep ``other``'s deviations that this one lacks (checked already: ``other``
        must be of the same table, e.g. made by :meth:`inside`)."""
        have = {(support.tobytes(), values.tobytes()) for support, values in self._found}
        for support, values in other.deviations():
            if (support.tobytes(), values.tobytes()) not in have:
                self._keep(support, values)

    def inside(self, hidden: Set[int], watch: Set[int] = frozenset()) -> Certificates:
        """The deviations that move only cells of ``hidden`` (proofs for any pattern
        that withholds at least ``hidden``), watching ``watch`` (see ``__init__``)."""
        kept = Certificates.__new__(Certificates)
        kept._columns, kept._up, kept._down = self._columns, self._up, self._down
        kept._watch = frozenset(watch)
        kept._found, kept._touch, kept._reach, kept._by_cell = [], [], [], defaultdict(list)
        kept._withdrawn = set()
        for support, values in self.deviations(within=hidden):
            kept._keep(support, values)
        return kept
