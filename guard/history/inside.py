"""Is some combination v* + w (w in a row span) supported inside one sensitive set?

The group search (``groups.py``) asks this of every sensitive set among the coordinates
of a check: v* is the candidate's residue row, the rows of ``rest`` span what earlier
answers allow to add. Asked one set at a time (a left null space of [v*; rest] without
the set's columns, per set) it cost the Fair session 29,000 eliminations and 190 s on one
answer. One reduced echelon form of ``rest`` answers every set:

Let R be rest in reduced row echelon form mod p (pivot column c_i of row i: 1 there, 0 in
the other pivot columns) and x = v* - sum_i v*[c_i] R_i, zero on every pivot column.
v* + w vanishes outside a set S for some w in span(R) iff x + sum_i b_i R_i does; on a
pivot column c_i outside S that entry is b_i, so b_i = 0 there, and what is left is
whether x restricted to the columns outside S lies in the span of the rows R_i whose
pivots are in S: a system of a handful of rows (as many as S has pivot columns).
"""

from __future__ import annotations

import numpy as np

from guard.arrays import distinct
from guard.history.elimination import combine, reduced_echelon
from guard.history.steps import Ids, Residues

__all__ = ["inside_one_set"]


def inside_one_set(star: Residues, rest: Residues, sets: Ids, p: int) -> int | None:
    """A set number s (``sets[j]``: the set of coordinate j, -1 for none) such that some
    ``star + w``, w in the row span of ``rest``, is zero on every coordinate outside s;
    None when no set has one."""
    numbers = distinct(sets[sets >= 0])
    if not numbers.size:
        return None
    if rest.shape[0]:
        reduced, pivots = reduced_echelon(rest, p)
    else:
        reduced, pivots = np.zeros((0, star.size), dtype=np.int64), np.zeros(0, dtype=np.int64)
    x = _reduced(star % p, reduced, pivots, p)
    pivot_set = sets[pivots] if pivots.size else np.zeros(0, dtype=np.int64)
    x_support = np.flatnonzero(x)
    for number in numbers.tolist():
        outside = sets != number
        own = np.flatnonzero(pivot_set == number)
        if not own.size:
            if not outside[x_support].any():
                return int(number)
            continue
        block = reduced[own]
        # only the columns outside the set where x or these rows are nonzero matter
        used = outside & ((x != 0) | block.any(axis=0))
        if not used.any():
            return int(number)
        target = x[used]
        if _in_span(target, block[:, used], p):
            return int(number)
    return None


def _in_span(vector: Residues, rows: Residues, p: int) -> bool:
    """Whether ``vector`` is a combination of ``rows`` mod p (a few rows)."""
    if not vector.any():
        return True
    reduced, pivots = reduced_echelon(rows, p)
    return pivots.size > 0 and not _reduced(vector, reduced, pivots, p).any()


def _reduced(vector: Residues, reduced: Residues, pivots: Ids, p: int) -> Residues:
    """``vector`` minus its combination of the echelon rows on their pivot columns: zero on
    every pivot column, and zero everywhere iff ``vector`` is in their span."""
    if not pivots.size:
        return vector
    left: Residues = (vector - combine(vector[pivots][None, :], reduced, p)[0]) % p
    return left
