"""Who knows what: the single contributors of withheld cells (insiders) and proofs of
a requirement's levels against each of them.

The sole contributor of a withheld single-contributor cell knows its value (and every
single-contributor cell nested with it: :func:`same_unit`). A deviation that leaves her
cells in place is one she cannot rule out either, so it proves a requirement's levels
against her (:func:`insider_levels`: a cell holding her own needs less below).
:class:`InsiderProver` proves a requirement against a list of insiders with the
smallest deviations (:mod:`~guard.suppression.smallest`): the first moves few cells, so
it holds against every insider it leaves in place, and only those it moves need
another, one avoiding them all; when none does, they are split in halves, down to
single insiders. Used at the least pattern (:mod:`~guard.suppression.standing`) and on
a chosen pattern (the insider audit of :mod:`~guard.suppression.singletons`).
"""

from __future__ import annotations

from collections.abc import Sequence, Set

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from guard.suppression.certificates import Certificates
from guard.suppression.smallest import SmallestDeviation
from guard.suppression.table import TOTAL, Key, Table

__all__ = ["MAX_PIVOT_WORK", "InsiderProver", "insider_levels", "same_unit"]

#: simplex iterations of the smallest-deviation LPs one proof run may spend, times the
#: table's cells (an iteration costs about 35 us on a 2,300- or 3,800-cell view: the
#: 1,111 requirements of a 3,840-cell view were proven in 95,000 iterations, 3.7 s).
#: The requirements left unproven when it runs out stay requirements of the pattern
MAX_PIVOT_WORK = 4_000_000_000


class InsiderProver:
    """Proofs of one requirement's levels against the outsider and a list of insiders,
    from the certificates found so far or new LPs (within the budget): the smallest
    deviation (:mod:`~guard.suppression.smallest`) moves few cells, so it proves the
    levels against every insider whose cells it leaves in place, and only the insiders
    it moves need another deviation."""

    def __init__(
        self,
        table: Table,
        lp: SmallestDeviation,
        certificates: Certificates,
        solves: int | None,
        iterations: int,
    ) -> None:
        self._table = table
        self._lp = lp
        self._certificates = certificates
        self._solves = solves
        self._iterations = iterations

    def _spent(self) -> bool:
        if self._solves is not None and self._lp.solved >= self._solves:
            return True
        return self._lp.iterations >= self._iterations

    def proven(self, p: int, levels: tuple[float, float], insiders: Sequence[frozenset[int]]) -> bool:
        """Both levels of ``p`` against the outsider and every one of ``insiders``."""
        for level, upward in zip(levels, (True, False), strict=True):
            if level <= 0:
                continue
            every = frozenset().union(*insiders)
            if insiders and self._certificates.witness(p, level, upward, avoid=every) is not None:
                continue  # a deviation found before leaves them all in place
            found = self._witness(p, level, upward, frozenset())
            if found is None:
                return False
            if not self._against(p, levels, upward, self._moved(found, insiders)):
                return False
        return True

    def _against(
        self, p: int, levels: tuple[float, float], upward: bool, insiders: Sequence[frozenset[int]]
    ) -> bool:
        """Proofs against each of ``insiders``: one deviation avoiding them all, or
        (when none does) proofs for each half."""
        if not insiders:
            return True
        avoid = frozenset().union(*insiders)
        level = levels[0] if upward else levels[1]
        found = self._witness(p, level, upward, avoid)
        if found is not None:
            return True
        if not upward:
            # an insider whose own cell lies in p needs less below (see insider_levels):
            # the level against all of them is the largest any of them needs
            needed = 0.0
            for known in insiders:
                needed = max(needed, insider_levels(self._table, p, levels, known)[1])
                if needed >= level:
                    break
            if needed < level and (needed <= 0 or self._witness(p, needed, upward, avoid) is not None):
                return True
        if len(insiders) <= 1:
            return False
        half = len(insiders) // 2
        return all(self._against(p, levels, upward, part) for part in (insiders[:half], insiders[half:]))

    def _moved(self, found: int, insiders: Sequence[frozenset[int]]) -> list[frozenset[int]]:
        """The ``insiders`` whose cells deviation ``found`` moves."""
        touched = self._certificates.touched(found)
        return [g for g in insiders if not touched.isdisjoint(g)]

    def _witness(self, p: int, level: float, upward: bool, avoid: frozenset[int]) -> int | None:
        """A certificate (its number) that moves ``p`` by ``level`` without moving
        ``avoid``: one found so far, or by one more LP while the budget lasts."""
        found = self._certificates.witness(p, level, upward, avoid=avoid)
        if found is not None or self._spent():
            return found
        deviation = self._lp.solve(p, level if upward else -level, avoid)
        if deviation is None:
            return None
        support = np.flatnonzero(deviation)
        self._certificates.add(support, deviation[support], self._lp.movable(avoid))
        return self._certificates.witness(p, level, upward, avoid=avoid)


def insider_levels(
    table: Table, p: int, levels: tuple[float, float], known: frozenset[int]
) -> tuple[float, float]:
    """The levels cell ``p`` must keep against the insider who knows ``known``. A cell
    holding the insider's own cell cannot, to her, go below that cell's value (the rest
    is not negative): from that side she learns nothing the bounds did not already tell
    her, so the lower level stops there (it is the rest she must not learn)."""
    upper, lower = levels
    if table.lower[p] < 0:
        return levels
    key = table.keys[p]
    inside = [table.values[c] for c in known if c != p and _holds(key, table.keys[c])]
    if not inside:
        return levels
    return upper, max(0.0, min(lower, table.values[p] - max(inside)))


def _holds(total: Key, member: Key) -> bool:
    """Cell ``total`` holds cell ``member``'s rows (every fixed position agrees)."""
    return all(t is TOTAL or t == m for t, m in zip(total, member, strict=True))


def same_unit(table: Table, singletons: Set[int]) -> dict[int, frozenset[int]]:
    """Each singleton's class of singletons that surely share its one contributor: a
    total and a member that are both singletons (the member's rows lie in the total,
    which has one contributor), joined transitively (scipy's connected parts). Disjoint
    singletons are taken to be different people, which can only protect more."""
    edges = [
        (table.index(relation.total), member)
        for relation in table.relations
        if table.index(relation.total) in singletons
        for member in (table.index(k) for k in relation.members)
        if member in singletons
    ]
    n = len(table)
    rows = np.fromiter((e[0] for e in edges), dtype=np.int64, count=len(edges))
    columns = np.fromiter((e[1] for e in edges), dtype=np.int64, count=len(edges))
    graph = csr_matrix((np.ones(len(edges)), (rows, columns)), shape=(n, n))
    _, label = connected_components(graph, directed=False)
    classes: dict[int, set[int]] = {}
    for c in singletons:
        classes.setdefault(int(label[c]), set()).add(c)
    return {c: frozenset(classes[int(label[c])]) for c in singletons}
