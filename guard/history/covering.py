"""The group search settled by disjoint information sets, where its branching is slow.

The search (``smallgroup.py``) asks whether the coset x + V0 (V0 the row span of a d x n
matrix of rank d, over the coordinates where V0 is not zero) holds a vector whose support
touches fewer than ``need`` new units. When no unit belongs to two coordinates and each
coordinate holds at least ``c`` units, such a support has at most s = (need - 1) // c
coordinates, so it misses at least one of any s + 1 disjoint sets of coordinates. Take s
disjoint *information sets* (d columns each where V0 has full rank) and, as the last
set, every column left: a vector of the coset zero on an information set is unique (two
would differ by a vector of V0 zero on d independent columns, which is 0), x minus the
combination of the echelon rows pivoting there that cancels x; the vectors zero on the
last set are a smaller coset (V0 may lose rank there), searched. So those are the only
vectors that can be small: one with fewer than ``need`` units is a disclosure, and when
none is, the coset holds none (exact, whatever the prime).

This is the pigeonhole behind information-set decoding, made exhaustive by the
disjointness. It costs s + 1 eliminations of a d x n matrix (about 50 ms each at d = 55,
n = 4,742), so ``smallest_group`` tries it only after ``FIRST_NODES`` nodes of the
branch and bound settled nothing (most searches end in a few hundred). There the branch
and bound can spend its whole budget: a routine CUBE table asked after three others
(bench_routine, table 4) had three cells each exhausting 20,000 nodes (d = 27-28,
n = 377, k = 10), withheld; each is settled in 0.01-0.13 s. When s information sets do
not exist (too few columns, or the columns left lose rank; a row of V0 with fewer than
s nonzeros meets them all) the caller searches as before.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from guard.history.elimination import combine, reduced_echelon
from guard.history.steps import Ids, Residues
from guard.history.unitmatrix import UnitMatrix

__all__ = ["Search", "covered"]

#: ``smallest_group`` on a smaller coset (star, rest, units, k), on the caller's budget
Search = Callable[[Residues, Residues, UnitMatrix, int], "Residues | bool | None"]


def covered(
    x: Residues, rows: Residues, units: UnitMatrix, need: int, p: int, search: Search
) -> Residues | bool | None:
    """A vector of x + (row span of ``rows``, rank d) whose support touches fewer than
    ``need`` of ``units`` (one row per coordinate, no unit in two, none counted yet);
    False when the coset holds none; None when this cannot tell (the caller searches).
    ``search`` settles a smaller coset as ``smallest_group`` does, on its shared budget."""
    d, n = rows.shape
    cost = units.sizes
    if not d or not n or need <= 0 or int(cost.min()) < 1 or not units.disjoint():
        return None
    groups = (need - 1) // int(cost.min()) + 1  # one more than a small support's coordinates
    if (groups - 1) * d >= n:
        return None
    if int(np.count_nonzero(rows, axis=1).min()) < groups - 1:
        # a vector of V0 on fewer columns meets every information set (V0 would lose
        # rank on one it misses), so fewer disjoint ones exist than the groups need
        return None
    left = np.ones(n, dtype=bool)
    for group in range(groups):
        last = group == groups - 1
        free = np.flatnonzero(left)
        # the free columns first: the echelon form's pivots among them span what V0 is there
        order = np.concatenate([free, np.flatnonzero(~left)])
        echelon, pivots = reduced_echelon(rows[:, order], p)
        rank = int(np.count_nonzero(pivots < free.size))
        if rank < d and not last:
            return None  # too few information sets for the groups before the last
        if d - rank > d // 2:
            return None  # the last group's coset would be nearly the whole search
        inside = free if last else order[pivots]  # the last group takes every column left
        basis = np.zeros_like(echelon)
        basis[:, order] = echelon  # in the caller's columns: rows below ``rank`` are 0 on ``free``
        pivot_columns = order[pivots[:rank]]
        candidate: Residues = (x - combine(x[pivot_columns][None, :], basis[:rank], p)[0]) % p
        found = _zero_on(candidate, basis[rank:], inside, units, need, p, search)
        if found is not False:
            return found
        left[inside] = False
    return False


def _zero_on(
    candidate: Residues, rest: Residues, inside: Ids, units: UnitMatrix, need: int, p: int, search: Search
) -> Residues | bool | None:
    """The small vectors of candidate + (row span of ``rest``, zero on ``inside``) that
    are zero on ``inside`` (``candidate`` is zero on the pivots there): one, False, or
    None when the search of that smaller coset ran out of budget."""
    if candidate[inside].any():
        return False  # no vector of the coset is zero on the whole group
    if not rest.shape[0]:
        return candidate if int(units.sizes[np.flatnonzero(candidate)].sum()) < need else False
    outside = np.flatnonzero(~np.isin(np.arange(candidate.size), inside))
    found = search(candidate[outside], rest[:, outside], units.restricted(outside), need)
    if not isinstance(found, np.ndarray):
        return found
    full = np.zeros_like(candidate)
    full[outside] = found
    return full
