"""What an independent query would put in the row span, exactly: the basis rows after it.

The compact span audit (``span.py``) keeps random projections of the rows of
M^-1 A, which decide single atoms (and, in ``pairs.py``, unions of two) quickly. Groups
of any number of atoms, and combinations such as x1 - x2, need the rows themselves:
row j of M'^-1 A' (after the query) is the combination of released queries whose
vector is 1 on basis atom b_j, 0 on every other basis atom, and X'[j, a] on each
non-basis atom a. :class:`Exposure` evaluates such rows exactly (mod p) on every atom
as it would be after the query, from the stored query sets, for the positions the
group search (``groups.py``) asks about. Nothing changes in the auditor.

The coefficient of the new query in row j (``novelty``) is what tells a new
combination from an old one: a vector of the new span lies in the old span iff its
coefficient on the new query is zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.sparse import csr_matrix

from guard.history.atoms import AtomPartition, Refinement
from guard.history.basis import InverseBasis
from guard.history.modular import mul_mod
from guard.history.released import ReleasedSets
from guard.history.rowsets import RowIds
from guard.history.steps import Growth, Ids, Residues, Step

__all__ = ["Exposure", "tentative_atom"]


def tentative_atom(partition: AtomPartition, cut: Refinement, atom: int) -> RowIds:
    """The rows of ``atom`` as they would be after ``cut`` (inside parts have new ids)."""
    child = np.flatnonzero(cut.children == atom)
    if child.size:
        return cut.inside(int(child[0]))
    parent = np.flatnonzero(cut.split == atom)
    if parent.size:
        return np.setdiff1d(partition.rows(atom), cut.inside(int(parent[0])), assume_unique=True)
    return partition.rows(atom)


@dataclass(frozen=True, eq=False)
class Exposure:
    """The basis after one independent query, read exactly (see the module docstring)."""

    p: int
    step: Step
    growth: Growth
    basis: InverseBasis
    partition: AtomPartition
    released: ReleasedSets

    @property
    def rank(self) -> int:
        """The rank after the query (positions 0 .. rank - 1; the last one is new)."""
        return self.basis.rank + 1

    @property
    def atom_count(self) -> int:
        """Atoms after the query: the old ids (a cut one keeps its outside part) and the new parts."""
        return self.step.cut.atom_count_before + int(self.step.cut.children.size)

    def basis_atoms(self) -> Ids:
        """The basis atom at each position after the query."""
        return np.append(self.basis.atoms, self.growth.new_atom).astype(np.int64)

    def rows_of(self, atom: int) -> RowIds:
        return tentative_atom(self.partition, self.step.cut, atom)

    def changed_atoms(self) -> set[int]:
        """Atoms whose rows the query changes (cut ones) or creates."""
        cut = self.step.cut
        return {int(a) for a in cut.split} | {int(a) for a in cut.children}

    def novelty(self) -> Residues:
        """Per position: the coefficient of the new query in row j of M'^-1."""
        border, r = self.growth.border, self.basis.rank
        coefficient = np.empty(r + 1, dtype=np.int64)
        coefficient[:r] = (-mul_mod(border.u, border.s_inverse, self.p)) % self.p
        coefficient[r] = border.s_inverse % self.p
        return coefficient

    def in_query(self) -> npt.NDArray[np.bool_]:
        """Per atom after the query: whether the query covers it."""
        cut = self.step.cut
        inside = np.zeros(self.atom_count, dtype=bool)
        inside[cut.whole] = True
        inside[cut.children] = True
        return inside

    def rows_exactly(self, positions: Ids) -> tuple[Residues, int]:
        """Rows ``positions`` of M'^-1 A' on every atom after the query (len(positions) x
        atoms, mod p), and the work done (stored sets read), for the caller's budget.

        Each stored set is intersected once with the atoms' representative rows; the
        rows are then one sparse product, split in 25-bit halves so that float64 sums
        stay exact."""
        cut, p = self.step.cut, self.p
        old = cut.atom_count_before
        v = self.basis.combine(self.step.in_query)
        coefficients = self.basis.bordered_rows(positions, self.growth.border, v)
        used = np.flatnonzero(coefficients.any(axis=0))
        on_old = np.zeros((len(positions), old), dtype=np.int64)
        if used.size:
            representatives = self.partition.representatives(np.arange(old, dtype=np.int64))
            membership = self.released.membership(used, representatives)  # used x old, 0/1
            # (membership x coefficients) with each half's products exact in float64
            high = _product(membership, coefficients[:, used] >> _HALF, p)
            low = _product(membership, coefficients[:, used] & _LOW, p)
            on_old = mul_mod(high, (1 << _HALF) % p, p) + low
            np.subtract(on_old, p, out=on_old, where=on_old >= p)
        novelty = self.novelty()[np.asarray(positions, dtype=np.int64)]
        parent = np.concatenate([np.arange(old, dtype=np.int64), cut.split]).astype(np.int64)
        inside = self.in_query()
        out = on_old[:, parent]
        out += novelty[:, None] * inside[None, :]
        # both terms are residues, so one subtraction reduces the sum (cheaper than %)
        np.subtract(out, p, out=out, where=out >= p)
        return out, int(used.size)


_HALF = 25
_LOW = (1 << _HALF) - 1


def _product(membership: csr_matrix, half: Residues, p: int) -> Residues:
    """(half @ membership) mod p for 25-bit ``half``: sums of at most 2**28 such terms are
    exact in float64."""
    product: npt.NDArray[np.float64] = membership.T.dot(half.T.astype(np.float64)).T
    return np.rint(product).astype(np.int64) % p
