"""The algebra of the compact span audit: M^-1 and y, grown by bordered updates mod p.

M = A[:, B] is the r x r submatrix of the released rows on the basis atoms B; it stays
invertible mod p. y = M^-1 w (one column per random weighting), where w_i is the
weight of query i's atoms outside B. Basis atom j is derivable iff y_j = 0 in every
copy (``span.py`` explains why). Adding query q with new basis atom c borders M with
the column a_c and the row (q_B, q_c):

    M'^-1 = [[M^-1 + u v^T / s, -u / s], [-v^T / s, 1 / s]],
    u = M^-1 a_c,  v^T = q_B M^-1,  s = q_c - q_B u  (the Schur complement, != 0).

The inverse is kept sparse, by rows (``sparse.py``): M'^-1 is M^-1 padded with a
zero row and column plus the rank-one product U V^T, U = (u, -1), V = (v / s, -1 / s),
so a release changes the rows in supp(u) and the new row only, and memory follows the
nonzeros of M^-1, not r^2. Where M^-1 fills in (over half its entries nonzero, from rank
``DENSE_FROM_RANK``) it moves to a dense array, which is then smaller and faster. The
values are those of the dense inverse, entry for entry: decisions do not change.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from guard.history.capacity import grown
from guard.history.modular import inverse_mod, mul_mod, sum_mod
from guard.history.sparse import DenseLines, SparseLines

__all__ = ["Border", "InverseBasis"]

Ids = npt.NDArray[np.int64]
Residues = npt.NDArray[np.int64]

#: the rank from which a filled-in M^-1 (over half its entries nonzero) is kept dense
DENSE_FROM_RANK = 64

#: ``Border.unit`` when u = 0, and when u is dense
ZERO_COLUMN, DENSE_COLUMN = -2, -1


@dataclass(frozen=True, eq=False)
class Border:
    """The new basis atom's column: u = M^-1 a_c (``unit`` = j when u = e_j), and 1/s."""

    u: Residues
    unit: int
    s_inverse: int


class InverseBasis:
    """M^-1 (r x r, sparse) and y (r x copies) modulo the prime ``p``, with their basis atoms."""

    def __init__(self, p: int, copies: int) -> None:
        self.p = p
        self._rank = 0
        self._atoms = np.zeros(16, dtype=np.int64)  # the basis atom at each position
        # row j of M^-1: the queries whose combination gives b_j (dense once filled in)
        self._rows: SparseLines | DenseLines = SparseLines(p)
        self._y = np.zeros((16, copies), dtype=np.int64)
        # updates of M^-1 so far, and per position the update that last changed its row:
        # a row no update changed still gives the same combination of answers
        self._changes = 0
        self._touched = np.zeros(16, dtype=np.int64)

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

    @property
    def nonzeros(self) -> int:
        """Nonzero entries of M^-1."""
        return self._rows.nnz

    def nbytes(self) -> int:
        return self._rows.nbytes() + self._y.nbytes + self._atoms.nbytes

    @property
    def changes(self) -> int:
        """Updates of M^-1 so far (releases and exchanges): a mark for ``unchanged_since``."""
        return self._changes

    def unchanged_since(self, position: int, mark: int) -> bool:
        """True when no update after ``mark`` (a value of ``changes``) changed row
        ``position`` of M^-1."""
        return bool(self._touched[position] <= mark)

    def derivable(self) -> npt.NDArray[np.bool_]:
        """Per position: the basis atom's total is derivable now (y = 0 in every copy)."""
        return np.asarray(~self.y.any(axis=1), dtype=np.bool_)

    def inverse_row(self, position: int) -> Residues:
        """Row ``position`` of M^-1: the coefficients of the released queries that give atom b_j."""
        return self._rows.dense(position, self.rank)

    def inverse_line(self, position: int) -> tuple[Ids, Residues]:
        """Row ``position`` of M^-1 as (query indices, nonzero coefficients)."""
        return self._rows.line(position)

    def inverse_triplets(self, positions: Ids) -> tuple[Ids, Ids, Residues]:
        """Rows ``positions`` of M^-1 as (i, query, residue) entries, i indexing ``positions``."""
        return self._rows.triplets(np.asarray(positions, dtype=np.int64))

    def combine(self, positions: Ids) -> Residues:
        """v^T = q_B M^-1 for the query covering the basis atoms at ``positions``."""
        return self._rows.gather(np.asarray(positions, dtype=np.int64), self.rank)

    def solve(self, column: npt.NDArray[np.bool_]) -> Residues:
        """u = M^-1 a for a 0/1 column a (which released queries contain an atom)."""
        return self._rows.product(np.flatnonzero(column).astype(np.int64), self.rank)

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
        # only the rows where u != 0 move (u is 0 or e_j unless c's column was read)
        moved = np.flatnonzero(border.u)
        top = y % p
        top[moved] = (y[moved] - mul_mod(border.u[moved, None], ((new_weight + delta) % p)[None, :], p)) % p
        return np.vstack([top, delta[None, :]])

    def bordered_row(self, position: int, border: Border, v: Residues) -> Residues:
        """Row ``position`` of M'^-1 restricted to the r earlier queries (forensics)."""
        row: Residues = self.bordered_rows(np.array([position], dtype=np.int64), border, v)[0]
        return row

    def bordered_rows(self, positions: Ids, border: Border, v: Residues) -> Residues:
        """Rows ``positions`` of M'^-1 restricted to the r earlier queries, dense."""
        owner, index, value = self.bordered_triplets(positions, border, v)
        out = np.zeros((np.asarray(positions).size, self.rank), dtype=np.int64)
        np.add.at(out, (owner, index), value)
        return out % self.p

    def bordered_triplets(self, positions: Ids, border: Border, v: Residues) -> tuple[Ids, Ids, Residues]:
        """Rows ``positions`` of M'^-1 on the r earlier queries as (i, query, residue)
        entries, i indexing ``positions``; one (i, query) may repeat (its values add up)."""
        p, r = self.p, self.rank
        positions = np.asarray(positions, dtype=np.int64)
        scaled_v = mul_mod(v, border.s_inverse, p)
        support = np.flatnonzero(scaled_v)
        old = positions < r
        owner, index, value = self._rows.triplets(positions[old])
        owner = np.flatnonzero(old)[owner] if owner.size else owner
        parts_owner, parts_index, parts_value = [owner], [index], [value]
        # old rows gain u_j v / s; the new row is -v / s
        factors = np.zeros(positions.size, dtype=np.int64)
        factors[old] = border.u[positions[old]]
        factors[~old] = p - 1
        moved = np.flatnonzero(factors)
        if moved.size and support.size:
            block = mul_mod(factors[moved][:, None], scaled_v[support][None, :], p)
            parts_owner.append(np.repeat(moved, support.size))
            parts_index.append(np.tile(support, moved.size))
            parts_value.append(block.ravel())
        return np.concatenate(parts_owner), np.concatenate(parts_index), np.concatenate(parts_value)

    def extend(self, atom: int, border: Border, v: Residues, y: Residues) -> None:
        """Commit the bordered update: ``atom`` joins the basis, y becomes ``y`` ((r + 1) x copies).

        M'^-1 = pad(M^-1) + U V^T with U = (u, -1) and V = (v / s, -1 / s)."""
        p, r = self.p, self.rank
        self._reserve(r + 1)
        scaled_v = mul_mod(v, border.s_inverse, p)
        if border.unit >= 0:  # u = e_j
            u_index = np.array([border.unit], dtype=np.int64)
        elif border.unit == DENSE_COLUMN:
            u_index = np.flatnonzero(border.u).astype(np.int64)
        else:
            u_index = np.zeros(0, dtype=np.int64)
        big_u_index = np.append(u_index, r)
        big_u = np.append(border.u[u_index] % p, p - 1)
        v_index = np.flatnonzero(scaled_v).astype(np.int64)
        big_v_index = np.append(v_index, r)
        big_v = np.append(scaled_v[v_index], (-border.s_inverse) % p)
        self._rows.append()
        self._rows.add_outer(big_u_index, big_u, big_v_index, big_v)
        self._changes += 1
        self._touched[big_u_index] = self._changes  # the rows in supp(u), and the new one
        rows = self._rows
        if isinstance(rows, SparseLines) and r + 1 >= DENSE_FROM_RANK and 2 * rows.nnz > (r + 1) ** 2:
            self._rows = DenseLines(p, rows)  # half full: dense is smaller, and faster
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
        # d scaled by a unit mod the prime is nonzero exactly where d is: only those
        # entries are multiplied, and only those rows of y move (d spans the rank)
        d_index = np.flatnonzero(d).astype(np.int64)
        scaled = mul_mod(d[d_index], inverse, p)
        minus = (-scaled) % p
        row_index, row_value = self._rows.line(position)  # replaced, never mutated: a snapshot
        self._rows.add_outer(d_index, minus, row_index, row_value)
        self._changes += 1
        self._touched[d_index] = self._changes  # the rows in supp(x - e_j), and row j
        self._touched[position] = self._changes
        y = self._y[:r]
        shift = (y[position] + weight_out) % p
        y[d_index] = (y[d_index] - mul_mod(scaled[:, None], shift[None, :], p)) % p
        y[position] = (y[position] + weight_out - weight_in) % p
        self._atoms[position] = atom

    def _reserve(self, needed: int) -> None:
        self._y, self._atoms = grown(self._y, needed), grown(self._atoms, needed)
        self._touched = grown(self._touched, needed)
