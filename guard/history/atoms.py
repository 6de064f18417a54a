"""Atoms: the classes of rows that no released query set separates.

Every released SUM is a 0/1 vector over atoms, so the audit's size follows the number
of distinct atoms, not the table. The partition only ever refines: a new query set cuts
each atom it partly covers into an inside and an outside part.

Layout (classic partition refinement, vectorized): ``order`` lists the row ids grouped
by atom, each atom owning the contiguous slice ``order[start : start + size]``. A cut
moves the inside rows to the front of their slice by swapping them with the outside
rows that sat there. Refining by a query set of m rows costs O(m + atoms) (O(m log m)
for small sets) plus O(c log c) for its c rows inside cut atoms, whatever the sizes of
those atoms. The outside part keeps the atom's id (so the span audit keeps its basis
column) and the inside part gets a fresh id.

Refining is split in two so that a refused query leaves no trace: ``plan`` computes the
cut without changing anything; ``apply`` commits a plan made on the current state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from guard.arrays import distinct, runs
from guard.history.capacity import grown
from guard.history.rowsets import QuerySet, RowIds, as_row_ids

__all__ = ["AtomPartition", "Refinement"]

Ids = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class Refinement:
    """How one query set would cut the partition (read-only; see ``AtomPartition.plan``).

    ``split[i]`` is cut into an inside part with the new id ``children[i]`` (rows
    ``inside_rows[inside_bounds[i] : inside_bounds[i + 1]]``) and an outside part that
    keeps the id ``split[i]``. ``whole`` are the atoms the set covers entirely.
    """

    rows: RowIds
    atom_count_before: int
    whole: Ids
    split: Ids
    children: Ids
    inside_size: Ids
    inside_units: Ids
    outside_units: Ids
    inside_rows: RowIds
    inside_bounds: Ids

    @property
    def cuts_anything(self) -> bool:
        return bool(self.split.size)

    def inside(self, i: int) -> RowIds:
        """The rows of the inside part of ``split[i]``."""
        return self.inside_rows[self.inside_bounds[i] : self.inside_bounds[i + 1]]

    def group_sums(self, row_values: npt.NDArray[np.integer]) -> npt.NDArray[np.int64]:
        """Per split atom, the sums of ``row_values`` over its inside part: split x copies.

        ``row_values`` is copies x rows (indexed by row id). Sums are exact int64, so the
        caller keeps values small enough (uint32 weights are safe up to 2**31 rows).
        """
        if not self.split.size:
            return np.zeros((0, row_values.shape[0]), dtype=np.int64)
        picked = row_values[:, self.inside_rows].astype(np.int64)
        return np.add.reduceat(picked, self.inside_bounds[:-1], axis=1).T.copy()


class AtomPartition:
    """The partition of a table's rows into atoms, refined by query sets as they are released.

    ``unit_of_row[rid]`` is the privacy unit (respondent) of row ``rid``; rows are
    ``0 .. len(unit_of_row) - 1``. Each atom knows its rows and its number of distinct
    units. At the start there is one atom, id 0, holding every row.
    """

    def __init__(self, unit_of_row: npt.ArrayLike) -> None:
        units = np.asarray(unit_of_row)
        if units.ndim != 1 or units.size == 0:
            raise ValueError("unit_of_row must be a non-empty 1-d array: one privacy unit per row id")
        _, codes = np.unique(units, return_inverse=True)
        self._unit_of_row: Ids = codes.astype(np.int64).reshape(-1)
        n_rows = self._unit_of_row.size
        self._unit_count = int(self._unit_of_row.max()) + 1
        # One row per unit is the common case; it makes a part's unit count its size.
        self._one_row_per_unit = self._unit_count == n_rows
        self._rows_by_unit: Ids = np.argsort(self._unit_of_row, kind="stable").astype(np.int64)
        self._unit_ptr: Ids = np.concatenate(
            [[0], np.cumsum(np.bincount(self._unit_of_row, minlength=self._unit_count))]
        ).astype(np.int64)
        if self._one_row_per_unit:
            # then a part's units are its rows, and nothing reads these (every history
            # screen's partition: 32 bytes a finest cell of identity maps, not kept)
            self._unit_of_row = self._rows_by_unit = self._unit_ptr = np.zeros(0, dtype=np.int64)

        self._atom_of_row: Ids = np.zeros(n_rows, dtype=np.int64)
        self._order: Ids = np.arange(n_rows, dtype=np.int64)
        self._position: Ids = np.arange(n_rows, dtype=np.int64)
        self._in_query = np.zeros(n_rows, dtype=bool)  # scratch for apply; always all False between calls
        self._atom_count = 1
        self._start: Ids = np.zeros(16, dtype=np.int64)
        self._size: Ids = np.zeros(16, dtype=np.int64)
        self._units: Ids = np.zeros(16, dtype=np.int64)
        self._size[0] = n_rows
        self._units[0] = self._unit_count

    @classmethod
    def one_unit_per_row(cls, n_rows: int) -> AtomPartition:
        """A partition where every row is its own privacy unit."""
        return cls(np.arange(n_rows, dtype=np.int64))

    @property
    def row_count(self) -> int:
        return int(self._atom_of_row.size)

    @property
    def unit_count(self) -> int:
        return self._unit_count

    @property
    def atom_count(self) -> int:
        return self._atom_count

    def size(self, atom: int) -> int:
        """Number of rows of ``atom``."""
        return int(self._size[self._check(atom)])

    def units(self, atom: int) -> int:
        """Number of distinct privacy units with a row in ``atom``."""
        return int(self._units[self._check(atom)])

    def rows(self, atom: int) -> RowIds:
        """The row ids of ``atom`` (a fresh array, in no particular order)."""
        start = int(self._start[self._check(atom)])
        return self._order[start : start + int(self._size[atom])].copy()

    def rows_of_atoms(self, atoms: Ids) -> tuple[RowIds, Ids]:
        """The rows of ``atoms`` one atom after the other, and where each atom's begin:
        atom ``atoms[i]`` holds ``rows[bounds[i] : bounds[i + 1]]`` (``rows`` of many
        atoms in one pass, the same rows in the same order)."""
        atoms = np.asarray(atoms, dtype=np.int64)
        if atoms.size and (int(atoms.min()) < 0 or int(atoms.max()) >= self._atom_count):
            raise IndexError(f"atoms must be in 0..{self._atom_count - 1}")
        sizes = self._size[atoms]
        bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        positions = np.repeat(self._start[atoms] - bounds[:-1], sizes) + np.arange(int(bounds[-1]))
        return self._order[positions], bounds

    def representative(self, atom: int) -> int:
        """One row id of ``atom``: all its rows are in exactly the same released query sets."""
        return int(self._order[self._start[self._check(atom)]])

    def representatives(self, atoms: Ids) -> RowIds:
        """``representative`` of each atom, vectorized."""
        return self._order[self._start[atoms]]

    def atom_of(self, rows: QuerySet) -> Ids:
        """The atom of each row id (same order as the sorted, de-duplicated set)."""
        return self._atom_of_row[as_row_ids(rows, self.row_count)]

    def atoms_at(self, rows: RowIds) -> Ids:
        """The atom of each of ``rows`` (int64 row ids in range) in their order, repeats
        kept: for rows the audit stored itself, which need no checking or sorting."""
        return self._atom_of_row[rows]

    def sizes(self) -> Ids:
        return self._size[: self._atom_count].copy()

    def unit_counts(self) -> Ids:
        return self._units[: self._atom_count].copy()

    def units_of_rows(self, rows: RowIds) -> int:
        """Distinct privacy units among ``rows`` (e.g. a union of atoms)."""
        if self._one_row_per_unit:
            return int(np.asarray(rows).size)
        return int(distinct(self._unit_of_row[np.asarray(rows, dtype=np.int64)]).size)

    def nbytes(self) -> int:
        """Memory held by the partition: O(rows + atoms), independent of the number of queries."""
        per_row = (self._unit_of_row, self._rows_by_unit, self._atom_of_row, self._order, self._position)
        per_atom = (self._unit_ptr, self._start, self._size, self._units)
        return sum(a.nbytes for a in per_row + per_atom) + self._in_query.nbytes

    def plan(self, query_set: QuerySet) -> Refinement:
        """How ``query_set`` would cut the atoms, without changing the partition.

        Raises ValueError when the set holds a row id outside ``0 .. row_count - 1``.
        """
        rows = as_row_ids(query_set, self.row_count)
        atoms = self._atom_of_row[rows]
        touched, counts = self._count_by_atom(atoms)
        is_cut = counts < self._size[touched]
        split, inside_size = touched[is_cut], counts[is_cut]
        # Only the rows of cut atoms need grouping; usually far fewer than the query's rows.
        in_cut = np.zeros(self._atom_count, dtype=bool)
        in_cut[split] = True
        cut_rows = in_cut[atoms]
        inside_rows = rows[cut_rows][np.argsort(atoms[cut_rows])]
        inside_bounds = np.concatenate([[0], np.cumsum(inside_size)]).astype(np.int64)
        inside_units, outside_units = self._part_units(split, inside_size, inside_rows)
        return Refinement(
            rows=rows,
            atom_count_before=self._atom_count,
            whole=touched[~is_cut],
            split=split,
            children=np.arange(self._atom_count, self._atom_count + split.size, dtype=np.int64),
            inside_size=inside_size,
            inside_units=inside_units,
            outside_units=outside_units,
            inside_rows=inside_rows,
            inside_bounds=inside_bounds,
        )

    def apply(self, plan: Refinement) -> None:
        """Commit ``plan``, which must have been made on the current state (ValueError otherwise)."""
        if plan.atom_count_before != self._atom_count:
            raise ValueError("stale refinement: the partition changed since this plan was made; plan again")
        if not plan.split.size:
            return
        starts = self._start[plan.split]
        group_offsets = np.repeat(plan.inside_bounds[:-1], plan.inside_size)
        front = np.repeat(starts, plan.inside_size) + (np.arange(plan.inside_rows.size) - group_offsets)
        self._in_query[plan.inside_rows] = True
        displaced = front[~self._in_query[self._order[front]]]
        self._in_query[plan.inside_rows] = False
        positions = self._position[plan.inside_rows]
        misplaced = positions[positions >= np.repeat(starts + plan.inside_size, plan.inside_size)]
        # Both lists hold, atom by atom, the same number of positions inside that atom's
        # slice; slices are disjoint, so sorting pairs every swap within one atom.
        displaced.sort()
        misplaced.sort()
        outside_rows, inside_rows = self._order[displaced], self._order[misplaced]
        self._order[displaced], self._order[misplaced] = inside_rows, outside_rows
        self._position[inside_rows], self._position[outside_rows] = displaced, misplaced

        self._atom_of_row[plan.inside_rows] = np.repeat(plan.children, plan.inside_size)
        self._grow(self._atom_count + plan.split.size)
        self._start[plan.children] = starts
        self._size[plan.children] = plan.inside_size
        self._units[plan.children] = plan.inside_units
        self._start[plan.split] = starts + plan.inside_size
        self._size[plan.split] -= plan.inside_size
        self._units[plan.split] = plan.outside_units
        self._atom_count += plan.split.size

    def refine(self, query_set: QuerySet) -> Refinement:
        """Plan and apply in one step; returns the applied plan."""
        plan = self.plan(query_set)
        self.apply(plan)
        return plan

    def _count_by_atom(self, atoms: Ids) -> tuple[Ids, Ids]:
        """The distinct atoms (ascending) among ``atoms`` and how often each occurs."""
        if atoms.size * 2 < self._atom_count:  # fewer rows than atoms: sorting is cheaper
            touched, counts = np.unique(atoms, return_counts=True)
            return touched.astype(np.int64), counts.astype(np.int64)
        counts = np.bincount(atoms, minlength=self._atom_count)
        touched = np.flatnonzero(counts)
        return touched.astype(np.int64), counts[touched].astype(np.int64)

    def _part_units(self, split: Ids, inside_size: Ids, inside_rows: RowIds) -> tuple[Ids, Ids]:
        """Distinct units of the inside and the outside part of each cut atom."""
        if self._one_row_per_unit:
            return inside_size.copy(), self._size[split] - inside_size
        n_units = self._unit_count
        group = np.repeat(np.arange(split.size, dtype=np.int64), inside_size)
        pairs, rows_in_part = np.unique(group * n_units + self._unit_of_row[inside_rows], return_counts=True)
        pair_group, pair_unit = pairs // n_units, pairs % n_units
        inside_units = np.bincount(pair_group, minlength=split.size).astype(np.int64)
        # A unit leaves the outside part iff all its rows in the cut atom are inside.
        lengths = self._unit_ptr[pair_unit + 1] - self._unit_ptr[pair_unit]
        unit_rows = self._rows_by_unit[runs(self._unit_ptr[pair_unit], lengths)]
        pair_of_row = np.repeat(np.arange(pairs.size), lengths)
        in_atom = self._atom_of_row[unit_rows] == split[pair_group[pair_of_row]]
        rows_in_atom = np.bincount(pair_of_row[in_atom], minlength=pairs.size)
        gone = np.bincount(pair_group[rows_in_atom == rows_in_part], minlength=split.size)
        return inside_units, (self._units[split] - gone).astype(np.int64)

    def _grow(self, needed: int) -> None:
        rows = self.row_count  # an atom holds at least one row
        self._start, self._size = grown(self._start, needed, 0, rows), grown(self._size, needed, 0, rows)
        self._units = grown(self._units, needed, 0, rows)

    def _check(self, atom: int) -> int:
        if not 0 <= atom < self._atom_count:
            raise IndexError(f"atom {atom} does not exist; atoms are 0..{self._atom_count - 1}")
        return atom
