"""The algebra of the compact span audit: M^-1 and y, grown by bordered updates mod p.

M = A[:, B] is the r x r submatrix of the released rows on the basis atoms B; it stays
invertible mod p. y = M^-1 w (one column per random weighting), where w_i is the
weight of query i's atoms outside B. Basis atom j is derivable iff y_j = 0 in every
copy (``span.py`` explains why). Adding query q with new basis atom c borders M with
the column a_c and the row (q_B, q_c):

    M'^-1 = [[M^-1 + u v^T / s, -u / s], [-v^T / s, 1 / s]],
    u = M^-1 a_c,  v^T = q_B M^-1,  s = q_c - q_B u  (the Schur complement, != 0).

When u = 0 or u = e_j (the common cases) only O(r) entries change; otherwise the
rank-one update costs O(r^2). Memory is O(r^2) whatever the number of atoms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from guard.history.modular import add_outer_mod, inverse_mod, mul_mod, sum_mod

__all__ = ["Border", "InverseBasis"]

Ids = npt.NDArray[np.int64]
Residues = npt.NDArray[np.int64]

#: ``Border.unit`` when u = 0, and when u is dense
ZERO_COLUMN, DENSE_COLUMN = -2, -1


@dataclass(frozen=True, eq=False)
class Border:
    """The new basis atom's column: u = M^-1 a_c (``unit`` = j when u = e_j), and 1/s."""

    u: Residues
    unit: int
    s_inverse: int


class InverseBasis:
    """M^-1 (r x r) and y (r x copies) modulo the prime ``p``, with their basis atoms."""

    def __init__(self, p: int, copies: int) -> None:
        self.p = p
        self._rank = 0
        self._atoms = np.zeros(16, dtype=np.int64)  # the basis atom at each position
        self._inverse = np.zeros((16, 16), dtype=np.int64)
        self._y = np.zeros((16, copies), dtype=np.int64)

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def y(self) -> Residues:
        return self._y[: self.rank]

    @property
    def atoms(self) -> Ids:
        """The basis atom at each position (read-only for callers; an array, so that
        gathering a query's basis atoms costs O(its positions), not O(r))."""
        return self._atoms[: self._rank]

    def nbytes(self) -> int:
        return self._inverse.nbytes + self._y.nbytes + self._atoms.nbytes

    def derivable(self) -> npt.NDArray[np.bool_]:
        """Per position: the basis atom's total is derivable now (y = 0 in every copy)."""
        return np.asarray(~self.y.any(axis=1), dtype=np.bool_)

    def inverse_row(self, position: int) -> Residues:
        """Row ``position`` of M^-1: the coefficients of the released queries that give atom b_j."""
        return self._inverse[position, : self.rank]

    def combine(self, positions: Ids) -> Residues:
        """v^T = q_B M^-1 for the query covering the basis atoms at ``positions``."""
        return sum_mod(self._inverse[positions, : self.rank], self.p)

    def solve(self, column: npt.NDArray[np.bool_]) -> Residues:
        """u = M^-1 a for a 0/1 column a (which released queries contain an atom)."""
        r = self.rank
        return sum_mod(self._inverse[:r, :r][:, column], self.p, axis=1)

    def bordered_y(
        self, y: Residues, border: Border, new_weight: Residues, positions: Ids, outside: Residues
    ) -> Residues:
        """y' = M'^-1 w', (r + 1) x copies, from y (already adjusted for cut atoms).

        ``new_weight``: weight of c; ``positions``: basis atoms in q; ``outside``: the
        weight of q's atoms outside the new basis (w'_new). Old rows lose c's weight:
        w' = w - a_c weight_c, hence y' = y - u (weight_c + delta), y'_new = delta.
        """
        p = self.p
        q_y = sum_mod(y[positions], p)
        q_u = int(sum_mod(border.u[positions], p))
        delta = mul_mod((outside - q_y + mul_mod(new_weight, q_u, p)) % p, border.s_inverse, p)
        top = (y - mul_mod(border.u[:, None], ((new_weight + delta) % p)[None, :], p)) % p
        return np.vstack([top, delta[None, :]])

    def bordered_row(self, position: int, border: Border, v: Residues) -> Residues:
        """Row ``position`` of M'^-1 restricted to the r earlier queries (forensics)."""
        row: Residues = self.bordered_rows(np.array([position], dtype=np.int64), border, v)[0]
        return row

    def bordered_rows(self, positions: Ids, border: Border, v: Residues) -> Residues:
        """Rows ``positions`` of M'^-1 restricted to the r earlier queries, at once."""
        p, r = self.p, self.rank
        scaled_v = mul_mod(v, border.s_inverse, p)
        positions = np.asarray(positions, dtype=np.int64)
        out = np.empty((positions.size, r), dtype=np.int64)
        old = positions < r
        out[old] = self._inverse[positions[old], :r]
        out[old] = (out[old] + mul_mod(border.u[positions[old]][:, None], scaled_v[None, :], p)) % p
        out[~old] = (-scaled_v) % p
        return out

    def extend(self, atom: int, border: Border, v: Residues, y: Residues) -> None:
        """Commit the bordered update: ``atom`` joins the basis, y becomes ``y`` ((r + 1) x copies)."""
        p, r = self.p, self.rank
        self._reserve(r + 1)
        scaled_v = mul_mod(v, border.s_inverse, p)
        top = self._inverse[:r, :r]
        if border.unit >= 0:  # u = e_j: only row j changes
            top[border.unit] = (top[border.unit] + scaled_v) % p
        elif border.unit == DENSE_COLUMN:
            add_outer_mod(top, border.u, scaled_v, p)
        self._inverse[:r, r] = (-mul_mod(border.u, border.s_inverse, p)) % p
        self._inverse[r, :r] = (-scaled_v) % p
        self._inverse[r, r] = border.s_inverse
        self._y[: r + 1] = y
        self._atoms[r] = atom
        self._rank += 1

    def exchange(
        self, position: int, atom: int, x: Residues, weight_out: Residues, weight_in: Residues
    ) -> None:
        """Atom ``atom`` (column a, with x = M^-1 a and x_j != 0) replaces the basis atom at
        ``position`` = j, which leaves with weight ``weight_out``; ``weight_in`` is the
        entering atom's weight. The span does not change, only which atoms are its basis.

        M' = M + (a - M e_j) e_j^T, so (Sherman-Morrison, d = x - e_j)
            M'^-1 = M^-1 - d row_j(M^-1) / x_j,
            y' = y - d (y_j + weight_out) / x_j + e_j (weight_out - weight_in).
        """
        p, r = self.p, self.rank
        inverse = inverse_mod(int(x[position]), p)
        d = x.copy()
        d[position] = (d[position] - 1) % p
        scaled = mul_mod(d, inverse, p)
        row = self._inverse[position, :r].copy()
        add_outer_mod(self._inverse[:r, :r], (-scaled) % p, row, p)
        y = self._y[:r]
        shift = (y[position] + weight_out) % p
        y[...] = (y - mul_mod(scaled[:, None], shift[None, :], p)) % p
        y[position] = (y[position] + weight_out - weight_in) % p
        self._atoms[position] = atom

    def _reserve(self, needed: int) -> None:
        if needed <= self._y.shape[0]:
            return
        capacity = max(needed, 2 * self._y.shape[0])
        old = self._y.shape[0]
        inverse = np.zeros((capacity, capacity), dtype=np.int64)
        inverse[:old, :old] = self._inverse
        y = np.zeros((capacity, self._y.shape[1]), dtype=np.int64)
        y[:old] = self._y
        atoms = np.zeros(capacity, dtype=np.int64)
        atoms[:old] = self._atoms
        self._inverse, self._y, self._atoms = inverse, y, atoms
