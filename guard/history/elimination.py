"""Elimination mod p for the group search (``groups.py``, ``inside.py``): left null
spaces, reduced echelon forms, pivoting coordinates out of a span in place with an undo
trail (``Restriction``), and the sparse pre-passes that shrink the rows first.

Every value is a residue mod a prime below 2**50; products go through ``mul_mod`` or
``add_outer_mod``, so the arithmetic is exact.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.sparse import csr_matrix

from guard.history.csrpick import entry_rows, pick_rows
from guard.history.modular import HALF, LOW, add_outer_mod, inverse_mod, mul_mod
from guard.history.steps import Ids, Residues

__all__ = [
    "Restriction",
    "combine",
    "combine_sparse",
    "compacted",
    "left_null_space",
    "linked_to",
    "peeled",
    "reduced_echelon",
]

#: rows of a sparse combination summed in int64 at once: products of two 25-bit halves
#: are below 2**50, so 2**12 of them stay below 2**62 (and two such sums below 2**63)
_CHUNK = 1 << 12


class Restriction:
    """x + span(rows), ``rows`` in reduced echelon form, restricted in place to the vectors
    zero on one coordinate after another (the group search's branch "v is zero here"),
    with an undo trail back to any earlier ``mark``.

    A restriction changes only the rows nonzero on the coordinate, only where the row
    pivoting it out is nonzero, and retires that row: a copy of the whole matrix per
    step (``np.delete``) was most of a deep search's time. Retired rows stay in place,
    in their order, so the row chosen to pivot a coordinate out (the first live one
    nonzero there) and every value are those of deleting them.
    """

    def __init__(self, x: Residues, rows: Residues, pivots: Ids, p: int) -> None:
        self.x = x.copy()
        self.rows = rows.copy()
        #: the pivot column of each row (of the live ones: ``pivots[live()]``)
        self.pivots = pivots
        self.p = p
        self.alive = np.ones(rows.shape[0], dtype=bool)
        #: per column: how many live rows are nonzero there (0: the span vanishes there)
        self.nonzero = np.count_nonzero(rows, axis=0).astype(np.int64)
        self._trail: list[tuple[int, Ids, Residues | None, Ids, Residues | None, Ids | None]] = []

    def live(self) -> Ids:
        """The live rows, in their first order."""
        return np.flatnonzero(self.alive)

    def mark(self) -> int:
        return len(self._trail)

    def restrict(self, pick: int) -> None:
        """Keep the vectors zero on ``pick`` (a live row is nonzero there).

        A deep search restricts ~10 times per node, most often one row retired and none
        or one changed over a few dozen columns: the cost is numpy's per-call overhead,
        so the steps that have nothing to do are skipped."""
        p, rows, x = self.p, self.rows, self.x
        on = np.flatnonzero(rows[:, pick])
        on = on[self.alive[on]]
        pivot_row = int(on[0])
        pivot = rows[pivot_row]
        columns = np.flatnonzero(pivot)
        inverse = inverse_mod(int(pivot[pick]), p)
        saved_x = None
        if x[pick]:
            saved_x = x[columns]
            x[columns] = (saved_x - mul_mod(pivot[columns], int(x[pick]) * inverse % p, p)) % p
        changing = on[1:]
        saved = None
        gained = None
        if changing.size:
            block = np.ix_(changing, columns)
            saved = rows[block]
            # row - factor * pivot as row + (p - factor) * pivot, in place in cache-sized
            # blocks: the same residues as mul_mod's temporaries (rows of a dense span
            # change over thousands of columns)
            updated = saved.copy()
            add_outer_mod(updated, p - mul_mod(rows[changing, pick], inverse, p), pivot[columns], p)
            rows[block] = updated
            gained = np.count_nonzero(updated, axis=0) - np.count_nonzero(saved, axis=0)
            self.nonzero[columns] += gained - 1
        else:
            self.nonzero[columns] -= 1  # the retired row's nonzeros
        self.alive[pivot_row] = False
        self._trail.append((pivot_row, columns, saved_x, changing, saved, gained))

    def undo(self, mark: int) -> None:
        """Back to the state of ``mark()``: the trail's entries after it, last first."""
        trail = self._trail
        while len(trail) > mark:
            pivot_row, columns, saved_x, changing, saved, gained = trail.pop()
            if saved is not None and gained is not None:
                self.rows[np.ix_(changing, columns)] = saved
                self.nonzero[columns] += 1 - gained
            else:
                self.nonzero[columns] += 1
            if saved_x is not None:
                self.x[columns] = saved_x
            self.alive[pivot_row] = True


def peeled(nonzero: csr_matrix) -> npt.NDArray[np.bool_]:
    """Rows that may be in a combination vanishing on every column: a row that is alone
    nonzero in some column never is, and dropping it may leave others alone."""
    row, column = entry_rows(nonzero), nonzero.indices
    alive = np.ones(nonzero.shape[0], dtype=bool)
    while True:
        live = alive[row]
        counts = np.bincount(column[live], minlength=nonzero.shape[1])
        lonely = np.zeros(nonzero.shape[0], dtype=bool)
        lonely[row[live & (counts[column] == 1)]] = True
        if not lonely.any():
            return alive
        alive &= ~lonely


def linked_to(nonzero: csr_matrix, seeds: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """Rows connected to a seed row through shared nonzero columns."""
    row, column = entry_rows(nonzero), nonzero.indices
    linked = seeds.copy()
    columns = np.zeros(nonzero.shape[1], dtype=bool)
    while True:
        columns[column[linked[row]]] = True
        grown = linked.copy()
        grown[row[columns[column]]] = True
        if (grown == linked).all():
            return linked
        linked = grown


def combine(coefficients: Residues, rows: Residues, p: int) -> Residues:
    """coefficients @ rows mod p without overflow (residues < 2**50)."""
    out = np.zeros((coefficients.shape[0], rows.shape[1]), dtype=np.int64)
    for i in range(coefficients.shape[1]):
        out = (out + mul_mod(coefficients[:, i][:, None], rows[i][None, :], p)) % p
    return out


def combine_sparse(coefficients: Residues, rows: csr_matrix, p: int) -> Residues:
    """coefficients @ rows mod p (dense, coefficients.shape[0] x rows.shape[1]) for sparse
    ``rows`` of residues: the same values as ``combine`` on ``rows.toarray()``.

    ``combine`` runs one dense pass per row of ``rows``, O(d x rows x columns); the group
    search's rows are sparse (under 1 % of the entries of an exact row on its small atoms
    are nonzero at 100,000 rows), so here both sides are split into 25-bit halves and
    multiplied by four sparse products in C, O(d x nonzeros), each exact in int64 (sums
    of at most ``_CHUNK`` products below 2**50)."""
    coefficients = np.asarray(coefficients, dtype=np.int64) % p
    out = np.zeros((coefficients.shape[0], rows.shape[1]), dtype=np.int64)
    rows = csr_matrix(rows, dtype=np.int64)
    for begin in range(0, rows.shape[0], _CHUNK):
        end = min(begin + _CHUNK, rows.shape[0])
        part = rows if (begin, end) == (0, rows.shape[0]) else pick_rows(rows, np.arange(begin, end))
        data = part.data % p
        high = csr_matrix((data >> HALF, part.indices, part.indptr), shape=part.shape)
        low = csr_matrix((data & LOW, part.indices, part.indptr), shape=part.shape)
        left = coefficients[:, begin : begin + _CHUNK]
        left_high, left_low = left >> HALF, left & LOW
        top = np.asarray(left_high @ high) % p
        cross = np.asarray(left_high @ low) % p + np.asarray(left_low @ high) % p
        bottom = np.asarray(left_low @ low) % p
        # top 2**50 + cross 2**25 + bottom = ((top 2**25 + cross) 2**25) + bottom
        shifted = (mul_mod(top, 1 << HALF, p) + cross) % p
        out += (mul_mod(shifted, 1 << HALF, p) + bottom) % p
        out %= p
    return out


def left_null_space(matrix: Residues, p: int) -> Residues:
    """A basis (rows) of {c : c^T matrix = 0 mod p}, by forward elimination on [matrix | I]:
    the rows whose left part ends zero carry, on the right, the combinations."""
    m, columns = matrix.shape
    left = matrix % p
    right = np.eye(m, dtype=np.int64)
    pivot_row = 0
    for column in range(columns):
        if pivot_row == m:
            break
        candidates = np.flatnonzero(left[pivot_row:, column])
        if not candidates.size:
            continue
        chosen = int(candidates[0]) + pivot_row
        if chosen != pivot_row:
            left[[pivot_row, chosen]] = left[[chosen, pivot_row]]
            right[[pivot_row, chosen]] = right[[chosen, pivot_row]]
        below = np.flatnonzero(left[pivot_row + 1 :, column]) + pivot_row + 1
        if below.size:
            factors = mul_mod(left[below, column], inverse_mod(int(left[pivot_row, column]), p), p)[:, None]
            pivot = left[pivot_row, column:][None, :]
            left[below, column:] = (left[below, column:] - mul_mod(factors, pivot, p)) % p
            right[below] = (right[below] - mul_mod(factors, right[pivot_row][None, :], p)) % p
        pivot_row += 1
    return right[pivot_row:].copy()


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
            # only where the pivot row is nonzero (rows of a group search are thousands of
            # columns wide, a pivot row's nonzeros often a fraction of them)
            block = np.ix_(others, np.flatnonzero(rows[top]))
            part = rows[block]
            add_outer_mod(part, p - rows[others, column], rows[top][block[1][0]], p)
            rows[block] = part
        pivots.append(column)
        top += 1
    return rows[:top].copy(), np.asarray(pivots, dtype=np.int64)


def compacted(rows: csr_matrix) -> tuple[Ids, csr_matrix]:
    """The columns ``rows`` touches (ascending) and ``rows`` on those columns only, as
    ``rows[:, touched]`` gives them, by a mask over the columns and a renumbering of the
    entries: a sort of every entry (``np.unique``) and scipy's column indexing were 15 %
    of a group check at 1M rows."""
    mark = np.zeros(rows.shape[1], dtype=bool)
    mark[rows.indices] = True
    touched = np.flatnonzero(mark).astype(np.int64)
    number = np.cumsum(mark, dtype=np.int64) - 1  # each touched column's new place
    out = csr_matrix(
        (rows.data.copy(), number[rows.indices], rows.indptr.copy()), shape=(rows.shape[0], touched.size)
    )
    return touched, out
