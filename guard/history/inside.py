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
import numpy.typing as npt

from guard.history.modular import inverse_mod, mul_mod

__all__ = ["inside_one_set", "reduced_echelon"]

Residues = npt.NDArray[np.int64]
Ids = npt.NDArray[np.int64]


def reduced_echelon(matrix: Residues, p: int) -> tuple[Residues, Ids]:
    """(R, pivots): the nonzero rows of ``matrix``'s reduced row echelon form mod p, and
    the pivot column of each (its entry 1, every other row 0 there)."""
    rows = matrix % p
    m, columns = rows.shape
    pivots: list[int] = []
    top = 0
    for column in range(columns):
        if top == m:
            break
        candidates = np.flatnonzero(rows[top:, column])
        if not candidates.size:
            continue
        chosen = int(candidates[0]) + top
        if chosen != top:
            rows[[top, chosen]] = rows[[chosen, top]]
        rows[top] = mul_mod(rows[top], inverse_mod(int(rows[top, column]), p), p)
        others = np.flatnonzero(rows[:, column])
        others = others[others != top]
        if others.size:
            factors = rows[others, column][:, None]
            rows[others] = (rows[others] - mul_mod(factors, rows[top][None, :], p)) % p
        pivots.append(column)
        top += 1
    return rows[:top].copy(), np.asarray(pivots, dtype=np.int64)


def inside_one_set(star: Residues, rest: Residues, sets: Ids, p: int) -> int | None:
    """A set number s (``sets[j]``: the set of coordinate j, -1 for none) such that some
    ``star + w``, w in the row span of ``rest``, is zero on every coordinate outside s;
    None when no set has one."""
    numbers = np.unique(sets[sets >= 0])
    if not numbers.size:
        return None
    if rest.shape[0]:
        reduced, pivots = reduced_echelon(rest, p)
    else:
        reduced, pivots = np.zeros((0, star.size), dtype=np.int64), np.zeros(0, dtype=np.int64)
    x = star % p
    if pivots.size:
        x = (x - _combine(x[pivots], reduced, p)) % p
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
    if not pivots.size:
        return False
    left = (vector - _combine(vector[pivots], reduced, p)) % p
    return not left.any()


def _combine(coefficients: Residues, rows: Residues, p: int) -> Residues:
    """sum_i coefficients[i] * rows[i] mod p."""
    out = np.zeros(rows.shape[1], dtype=np.int64)
    for i in np.flatnonzero(coefficients).tolist():
        out = (out + mul_mod(int(coefficients[i]), rows[i], p)) % p
    return out
