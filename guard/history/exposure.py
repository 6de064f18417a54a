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

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt
from scipy.sparse import csr_matrix

from guard.history.atoms import AtomPartition, Refinement
from guard.history.basis import InverseBasis
from guard.history.csrpick import entry_rows
from guard.history.modular import mul_mod
from guard.history.released import Probe, ReleasedSets
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


#: an atom holding at least 1 / _MASK_SHARE of the rows takes its outside part by a mask
_MASK_SHARE = 16
#: an atom of fewer rows takes its outside part by sorting (cheaper than any table)
_SORT_BELOW = 256


@dataclass(frozen=True, eq=False)
class Exposure:
    """The basis after one independent query, read exactly (see the module docstring)."""

    p: int
    step: Step
    growth: Growth
    basis: InverseBasis
    partition: AtomPartition
    released: ReleasedSets
    #: the representative rows of the atoms before the query (``SpanAuditor.atom_probe``),
    #: built only when rows are read: most checks end before, and the probe of a
    #: partition changed by the last release costs a pass over every atom
    probe_of: Callable[[], Probe]
    _coefficients: dict[tuple[int, bytes], csr_matrix] = field(default_factory=dict, init=False, repr=False)

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
        """The rows of ``atom`` after the query (as ``tentative_atom``, with the cut's
        parts looked up in a table: the group search asks for every small atom)."""
        child, parent = self._parts
        cut = self.step.cut
        if atom in child:
            return cut.inside(child[atom])
        if atom in parent:
            rows = self.partition.rows(atom)
            inside = cut.inside(parent[atom])
            universe = self.partition.row_count
            if rows.size < _SORT_BELOW or not inside.size:
                return np.setdiff1d(rows, inside, assume_unique=True)
            if rows.size * _MASK_SHARE < universe:
                # setdiff1d(rows, inside, assume_unique=True) is rows[~isin(rows, inside)]:
                # the same rows in the same order, looked up in a table over inside's
                # range instead of sorting both (measured: most of a GROUP BY's check)
                return rows[~np.isin(rows, inside, kind="table")]
            # a large atom (the never-queried one holds most rows, and nearly every new
            # query cuts it): setdiff1d(rows, inside, assume_unique=True) by a mask over
            # the row ids, the same rows in the same order without sorting both
            gone = np.zeros(universe, dtype=bool)
            gone[inside] = True
            return rows[~gone[rows]]
        return self.partition.rows(atom)

    @cached_property
    def probe(self) -> Probe:
        return self.probe_of()

    @cached_property
    def _parts(self) -> tuple[dict[int, int], dict[int, int]]:
        """The cut's inside parts and cut atoms, each to its index in the cut."""
        cut = self.step.cut
        child = {int(a): i for i, a in enumerate(cut.children.tolist())}
        return child, {int(a): i for i, a in enumerate(cut.split.tolist())}

    def changed_atoms(self) -> set[int]:
        """Atoms whose rows the query changes (cut ones) or creates."""
        cut = self.step.cut
        return {int(a) for a in cut.split} | {int(a) for a in cut.children}

    def novelty(self) -> Residues:
        """Per position: the coefficient of the new query in row j of M'^-1."""
        border, r = self.growth.border, self.basis.rank
        coefficient = np.zeros(r + 1, dtype=np.int64)
        moved = np.flatnonzero(border.u)  # zero elsewhere: -(0 * s^-1) mod p
        coefficient[moved] = (-mul_mod(border.u[moved], border.s_inverse, self.p)) % self.p
        coefficient[r] = border.s_inverse % self.p
        return coefficient

    def in_query(self) -> npt.NDArray[np.bool_]:
        """Per atom after the query: whether the query covers it."""
        cut = self.step.cut
        inside = np.zeros(self.atom_count, dtype=bool)
        inside[cut.whole] = True
        inside[cut.children] = True
        return inside

    def coefficients(self, positions: Ids) -> csr_matrix:
        """Rows ``positions`` of M'^-1 on the r earlier queries: a sparse len(positions) x r
        matrix of residues (no stored zeros). Its nonzero columns are the stored sets
        ``rows_exactly`` reads (its work)."""
        positions = np.asarray(positions, dtype=np.int64)
        key = (self.basis.changes, positions.tobytes())
        if key in self._coefficients:
            return self._coefficients[key]
        v = self.basis.combine(self.step.in_query)
        owner, query, value = self.basis.bordered_triplets(positions, self.growth.border, v)
        # COO to CSR sums the repeated (i, query) entries
        matrix = csr_matrix((value, (owner, query)), shape=(positions.size, self.basis.rank), dtype=np.int64)
        matrix.data %= self.p
        matrix.eliminate_zeros()
        # the last positions only (at the basis's count of updates): the witness and the
        # whole read of a check ask for the same rows (its readers never change the matrix)
        self._coefficients.clear()
        self._coefficients[key] = matrix
        return matrix

    def rows_exactly(self, positions: Ids) -> tuple[csr_matrix, int]:
        """Rows ``positions`` of M'^-1 A' on every atom after the query: a sparse
        len(positions) x atoms matrix of residues mod p (no stored zeros), and the work
        done (stored sets read), for the caller's budget.

        Each stored set with a nonzero coefficient is intersected once with the atoms'
        representative rows; the rows are then one exact sparse product
        (``ReleasedSets.combinations``; ``SparseLines`` keeps M'^-1's rows sparse). The
        cost follows the entries of the sets read, never positions x atoms."""
        cut, p = self.step.cut, self.p
        old = cut.atom_count_before
        positions = np.asarray(positions, dtype=np.int64)
        coefficients = self.coefficients(positions)
        on_old, used = self.released.combinations(  # m x old
            coefficients, lambda: self.probe, self.partition.atoms_at, self.partition.representatives, old, p
        )
        novelty = self.novelty()[positions]
        matrix = _after_cut(on_old, cut.split.astype(np.int64), novelty, self.in_query(), p)
        return matrix, used


def _after_cut(
    on_old: csr_matrix, split: Ids, novelty: Residues, inside: npt.NDArray[np.bool_], p: int
) -> csr_matrix:
    """The rows on every atom after the query, from their values ``on_old`` on the atoms
    before it: ``on_old[:, concat(arange(old), split)]`` (each cut atom's inside part,
    numbered old + i, has the column of ``split[i]``) plus ``novelty[i]`` on each atom
    inside the query, mod p, no stored zeros.

    Built from the stored arrays in row order: the entries of the rows with a new-query
    coefficient inside the query are summed in place, its other atoms in those rows
    added, and one stable sort by row merges the three row-ordered runs. scipy's column
    indexing argsorted an index array over every atom (hundreds of thousands at 1M rows)
    and its sum sorted every row's entries (py-spy: a tenth of q12's first answer)."""
    m, old = on_old.shape
    row = entry_rows(on_old)
    column = on_old.indices.astype(np.int64)
    value = np.array(on_old.data, dtype=np.int64)  # a copy: summed in place below
    if split.size:
        is_split = np.zeros(old, dtype=bool)
        is_split[split] = True
        hit = np.flatnonzero(is_split[column])
        order = np.argsort(split, kind="stable")
        part = old + order[np.searchsorted(split[order], column[hit])]
        row, column = np.concatenate([row, row[hit]]), np.concatenate([column, part])
        value = np.concatenate([value, value[hit]])
    fresh = np.flatnonzero(novelty)
    within = np.flatnonzero(inside)
    if fresh.size and within.size:
        slot = np.full(m, -1, dtype=np.int64)
        slot[fresh] = np.arange(fresh.size)
        met = np.flatnonzero((slot[row] >= 0) & inside[column])
        value[met] += novelty[row[met]]
        missing = np.ones((fresh.size, within.size), dtype=bool)
        missing[slot[row[met]], np.searchsorted(within, column[met])] = False
        at_fresh, at_within = np.nonzero(missing)
        row = np.concatenate([row, fresh[at_fresh]])
        column = np.concatenate([column, within[at_within]])
        value = np.concatenate([value, novelty[fresh[at_fresh]]])
    value %= p
    kept = np.flatnonzero(value)
    order = kept[np.argsort(row[kept], kind="stable")]
    pointer = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(row[kept], minlength=m), out=pointer[1:])
    return csr_matrix((value[order], column[order], pointer), shape=(m, old + split.size))
