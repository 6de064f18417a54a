"""Which atoms are *small* for the group search (``groups.py``): fewer than k privacy
units, or inside one sensitive set, so that they may be part of a disclosure.

Atoms only shrink, so the verdict is remembered per committed atom with the size it had
(a changed size means a cut: counted again) and its units; a part of an atom
remembered small is small (fewer units, inside the same sensitive set), so only parts
of large atoms are counted. Where units add up (``Units.disjoint``: no privacy unit
spans two auditor rows, as with one row per person) and no cell is flagged, a cut
atom's outside part has its atom's units less its inside part's: counted that way,
without reading its rows, both for a tentative step (``classifier``) and once a step
is released (``released``). The same counts, so the same verdicts as reading every
part's rows afresh.

Where the counter also gives its units per row id (``Weighted``: ``units(ids)`` is their
sum), every part is counted in one pass over the rows of all parts (``part_sums``)
instead of one call per atom: the same integer sums, so the same flags and verdicts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap

from guard.history.atoms import AtomPartition, Refinement
from guard.history.capacity import grown
from guard.history.rowsets import RowIds
from guard.history.steps import Ids

__all__ = ["SmallAtoms", "Units", "Weighted", "part_sums"]


class Units(Protocol):
    """The privacy units of sets of auditor row ids (``finest.FinestCells`` in the guard;
    one may also say ``disjoint = True`` when no unit spans two row ids)."""

    def units(self, ids: RowIds) -> int: ...

    def unit_ids(self, ids: RowIds) -> BitMap: ...


class Weighted(Protocol):
    """A ``Units`` whose units add up, given per row id: ``units(ids)`` is
    ``unit_weights()[ids].sum()`` for distinct ids (None: they do not add up)."""

    def unit_weights(self) -> Ids | None: ...


def part_sums(weights: Ids, rows: RowIds, bounds: Ids) -> Ids:
    """Per part ``rows[bounds[i] : bounds[i + 1]]``, the sum of ``weights`` over its rows
    (0 for an empty part): exact int64 sums of every part in one pass."""
    total: Ids = np.concatenate([[0], np.cumsum(weights[rows], dtype=np.int64)]).astype(np.int64)
    return total[bounds[1:]] - total[bounds[:-1]]


class SmallAtoms:
    """Small atoms of one audit state's partition, remembered per committed atom."""

    def __init__(self, k: int, units: Units, sensitive: npt.NDArray[np.int64] | None = None) -> None:
        """``sensitive``: per auditor row id, the sensitive set it lies in, or -1."""
        self.k = k
        self.counter = units
        self._sensitive = sensitive
        # per committed atom: 1 small, 0 large (with _flag_size rows, _flag_units units), -1 unknown
        self._flag = np.full(16, -1, dtype=np.int8)
        self._flag_size = np.zeros(16, dtype=np.int64)
        self._flag_units = np.zeros(16, dtype=np.int64)
        #: parts counted by subtraction (see the module docstring)
        self.subtract = bool(getattr(units, "disjoint", False)) and sensitive is None
        #: units per row id where they add up (subtracting only): every part counted in
        #: one pass (``part_sums``); None: one ``units`` call per atom
        weighted = getattr(units, "unit_weights", None) if self.subtract else None
        self._weights: Ids | None = weighted() if callable(weighted) else None
        #: the last cut whose inside parts were counted, and their units (each part's
        #: rows never change, so ``released`` takes what the check counted)
        self._counted: tuple[Refinement, Ids] | None = None

    def classifier(
        self,
        partition: AtomPartition,
        changed: set[int],
        rows_of: Callable[[int], RowIds],
        parents: dict[int, int] | None = None,
        cut: Refinement | None = None,
    ) -> Callable[[Ids], npt.NDArray[np.bool_]]:
        """Which atoms are small (remembered per committed atom); ``changed`` atoms (cut
        or created by a tentative step) are read with ``rows_of``, unless they are part
        of a committed atom remembered small (``parents``: each new part's cut atom), or
        (subtracting) the outside part of one remembered large. ``cut``: the tentative
        step's cut, whose atoms and parts ``changed`` and ``parents`` name; given (or
        no atom changed) and the units weighted, the parts are counted all at once."""
        if self._weights is not None and (cut is not None or not changed):
            return self._weighted_classifier(partition, cut, self._weights)
        parents = {} if parents is None else parents
        inside = {parent: child for child, parent in parents.items()}  # a cut atom's inside part
        count = partition.atom_count
        self._reserve(count)
        sizes = partition.sizes()
        changed_ids = np.fromiter(changed, dtype=np.int64, count=len(changed))
        # the committed atoms a tentative step cuts, as a mask over atom ids (an isin
        # over every basis atom per check cost more)
        cut_mask = None
        if changed_ids.size:
            cut_mask = np.zeros(count, dtype=bool)
            cut_mask[changed_ids[changed_ids < count]] = True

        def small_of(atoms: Ids) -> npt.NDArray[np.bool_]:
            out = np.zeros(atoms.size, dtype=bool)
            committed = atoms < count
            flags = np.full(atoms.size, -1, dtype=np.int8)
            flags[committed] = self._flag[atoms[committed]]
            stale = committed & (flags == 0)
            stale[stale] = self._flag_size[atoms[stale]] != sizes[atoms[stale]]
            flags[stale] = -1
            out[flags == 1] = True
            for i in np.flatnonzero(flags < 0).tolist():
                atom = int(atoms[i])
                if atom in changed:
                    parent = parents.get(atom, -1)
                    small_parent = 0 <= parent < count and self._flag[parent] == 1
                    out[i] = small_parent or self.protectable(rows_of(atom))
                    continue
                rows = partition.rows(atom)
                units = self.counter.units(rows)
                out[i] = units < self.k or self.set_of(rows) >= 0  # protectable(rows)
                self._flag[atom], self._flag_size[atom], self._flag_units[atom] = out[i], sizes[atom], units
            # a cut atom remembered large: its outside part is counted afresh (one
            # remembered small stays small)
            recheck = committed & (flags == 0)
            if cut_mask is None:
                recheck[:] = False
            else:
                recheck[recheck] = cut_mask[atoms[recheck]]
            for i in np.flatnonzero(recheck).tolist():
                atom = int(atoms[i])
                if self.subtract and atom in inside:
                    out[i] = self._flag_units[atom] - self.counter.units(rows_of(inside[atom])) < self.k
                else:
                    out[i] = self.protectable(rows_of(atom))
            return out

        return small_of

    def released(self, partition: AtomPartition, cut: Refinement) -> None:
        """``cut`` was just applied to ``partition`` (subtracting only): each cut atom
        remembered with its size before the cut keeps its verdict as its units less its
        inside part's, and each inside part is remembered from its rows, so neither is
        counted again from its rows at its next classification."""
        if not self.subtract or not cut.split.size:
            return
        self._reserve(partition.atom_count)
        sizes = partition.sizes()
        k = self.k
        if self._weights is not None:
            # the loop below, all parts at once: each part's atoms are its own (a cut
            # atom and its new inside part), so no step reads what another wrote
            units_in = self._inside_units(cut, self._weights)
            self._flag[cut.children] = units_in < k
            self._flag_size[cut.children], self._flag_units[cut.children] = cut.inside_size, units_in
            atoms = cut.split
            kept = (self._flag[atoms] >= 0) & (self._flag_size[atoms] == sizes[atoms] + cut.inside_size)
            atoms, left = atoms[kept], (self._flag_units[atoms] - units_in)[kept]
            self._flag[atoms], self._flag_size[atoms], self._flag_units[atoms] = left < k, sizes[atoms], left
            return
        flag, flag_size, flag_units = self._flag, self._flag_size, self._flag_units
        split, children, inside_size = cut.split.tolist(), cut.children.tolist(), cut.inside_size.tolist()
        for i, (atom, child) in enumerate(zip(split, children, strict=True)):
            units = self.counter.units(cut.inside(i))
            flag[child], flag_size[child], flag_units[child] = units < k, inside_size[i], units
            if flag[atom] >= 0 and flag_size[atom] == sizes[atom] + inside_size[i]:
                left = int(flag_units[atom]) - units
                flag[atom], flag_size[atom], flag_units[atom] = left < k, sizes[atom], left

    def _weighted_classifier(
        self, partition: AtomPartition, cut: Refinement | None, weights: Ids
    ) -> Callable[[Ids], npt.NDArray[np.bool_]]:
        """``classifier`` where units add up, given per row id (so no sensitive set):
        the same verdicts and remembered flags, every part counted in one pass. A new
        part (id ``count + i``: ``cut``'s inside part i) is small when its cut atom is
        remembered small or by its units; a cut atom's outside part has its atom's units
        (remembered, else counted from its rows) less its inside part's."""
        count, k = partition.atom_count, self.k
        self._reserve(count)
        sizes = partition.sizes()
        split = np.zeros(0, dtype=np.int64) if cut is None else cut.split
        if cut is not None and cut.atom_count_before != count:
            raise ValueError("stale refinement: the partition changed since this cut was planned")

        part_at = np.full(count, -1, dtype=np.int64)  # per atom: its index in the cut, or -1
        part_at[split] = np.arange(split.size)

        def small_of(atoms: Ids) -> npt.NDArray[np.bool_]:
            committed = atoms < count
            every = bool(committed.all())
            ids = atoms if every else np.where(committed, atoms, 0)  # in range, to gather
            flags = self._flag[ids]
            flags[(flags == 0) & (self._flag_size[ids] != sizes[ids])] = -1  # remembered at another size
            if not every:
                flags[~committed] = -1
            out: npt.NDArray[np.bool_] = flags == 1
            units_in = None if cut is None else self._inside_units(cut, weights)
            if not every:  # inside parts of the tentative cut
                new = np.flatnonzero(~committed)
                part = atoms[new] - count
                if units_in is None or int(part.max()) >= split.size:
                    raise IndexError(f"atoms must be in 0..{count + split.size - 1}")
                out[new] = (self._flag[split[part]] == 1) | (units_in[part] < k)
            unknown = np.flatnonzero((flags < 0) & committed)
            if unknown.size:
                atom = atoms[unknown]
                units = part_sums(weights, *partition.rows_of_atoms(atom))
                at = part_at[atom]
                is_cut = at >= 0
                if units_in is not None and is_cut.any():  # a cut atom's outside part (not remembered)
                    units[is_cut] -= units_in[at[is_cut]]
                out[unknown] = units < k
                whole, units = atom[~is_cut], units[~is_cut]  # no cut changes it: remembered
                self._flag[whole], self._flag_size[whole] = units < k, sizes[whole]
                self._flag_units[whole] = units
            if units_in is not None:  # a cut atom remembered large: its outside part by subtraction
                at = part_at[ids]
                recheck = np.flatnonzero((flags == 0) & (at >= 0))
                out[recheck] = self._flag_units[atoms[recheck]] - units_in[at[recheck]] < k
            return out

        return small_of

    def _inside_units(self, cut: Refinement, weights: Ids) -> Ids:
        """The units of each inside part of ``cut``, counted once per cut."""
        if self._counted is None or self._counted[0] is not cut:
            self._counted = (cut, part_sums(weights, cut.inside_rows, cut.inside_bounds))
        return self._counted[1]

    def protectable(self, rows: RowIds) -> bool:
        """Fewer than k units, or inside one sensitive set: such an atom may be in a disclosure."""
        if self.counter.units(rows) < self.k:
            return True
        return self.set_of(rows) >= 0

    def set_of(self, rows: RowIds) -> int:
        """The sensitive set holding all of ``rows``, or -1."""
        if self._sensitive is None or not len(rows):
            return -1
        sets = self._sensitive[np.asarray(rows, dtype=np.int64)]
        return int(sets[0]) if sets[0] >= 0 and bool((sets == sets[0]).all()) else -1

    def _reserve(self, count: int) -> None:
        self._flag, self._flag_size = grown(self._flag, count, -1), grown(self._flag_size, count)
        self._flag_units = grown(self._flag_units, count)
