"""What a span auditor reports: atoms (and unions of two) whose totals a step makes
derivable, for the offline log audit and forensics. The online screen asks the group
search (``groups.py``) instead, which covers any combination of any number of atoms.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np

from guard.history.atoms import AtomPartition, Refinement
from guard.history.basis import InverseBasis
from guard.history.exposure import tentative_atom
from guard.history.released import ReleasedSets
from guard.history.rowsets import QuerySet, RowIds
from guard.history.steps import Growth, Ids, Residues, Step

__all__ = ["AtomDisclosure", "AtomView", "DisclosureReport", "SensitivePredicate"]


@dataclass(frozen=True, eq=False)
class AtomView:
    """An atom as a per-atom predicate sees it: id, row ids, number of privacy units."""

    atom: int
    rows: RowIds
    units: int


@dataclass(frozen=True)
class AtomDisclosure:
    """An atom whose total is (or would become) derivable from released answers.

    ``queries``: tags of the earlier releases that, with the candidate query, determine
    it (for forensics and the offline audit; never for an analyst's refusal message).
    """

    atom: int
    rows: int
    units: int
    queries: tuple[Hashable, ...]
    #: for a union of two atoms (``atom`` is then -1): both atoms, else ()
    atoms: tuple[int, ...] = ()


#: extra test of a derivable atom: True means its total must stay hidden whatever its size
SensitivePredicate = Callable[[AtomView], bool]


class DisclosureReport:
    """The reporting part of a span auditor (a mixin: it reads the auditor's state)."""

    _p: int
    _basis: InverseBasis
    _partition: AtomPartition
    _released: ReleasedSets

    @property
    def rank(self) -> int:
        return self._basis.rank

    def _step(self, query_set: QuerySet) -> Step:
        raise NotImplementedError

    def _new_pairs(self, step: Step, growth: Growth) -> list[tuple[tuple[int, int], tuple[int, ...]]]:
        raise NotImplementedError

    def would_disclose(
        self,
        query_set: QuerySet,
        k: int,
        sensitive: SensitivePredicate | None = None,
        *,
        unions: SensitivePredicate | None = None,
    ) -> list[AtomDisclosure]:
        """Atoms whose total releasing ``query_set`` would newly make derivable, among those with
        fewer than ``k`` privacy units or for which ``sensitive`` says True. Changes nothing.

        Unions of two atoms that would newly become derivable (while neither atom is) are
        reported too when they have fewer than ``k`` units or ``unions`` says True for
        them (an AtomView with atom -1). With one row per unit and k <= 3 every group of
        fewer than k rows is an atom or a union of two, so the search is then complete.

        Empty when the query is implied. ``sensitive`` must not read hidden values unless the
        policy accepts that its refusals then leak. ValueError for row ids outside the table.
        """
        step = self._step(query_set)
        if step.growth is None:
            return []
        found = []
        growth = step.growth
        v: Residues | None = None
        for position in self._newly_derivable(growth):
            atom = int(self._basis.atoms[position]) if position < self.rank else growth.new_atom
            rows, units = self._tentative_atom(step.cut, atom)
            if units < k or (sensitive is not None and sensitive(AtomView(atom, rows, units))):
                v = self._basis.combine(step.in_query) if v is None else v
                queries = self._released.tags(self._basis.bordered_row(position, growth.border, v))
                found.append(AtomDisclosure(atom, int(rows.size), units, queries))
        for pair, positions in self._new_pairs(step, growth):
            parts = [self._tentative_atom(step.cut, atom)[0] for atom in pair]
            rows = np.sort(np.concatenate(parts))
            units = self._partition.units_of_rows(rows)
            if units < k or (unions is not None and unions(AtomView(-1, rows, units))):
                v = self._basis.combine(step.in_query) if v is None else v
                combined = sum(
                    (self._basis.bordered_row(int(j), growth.border, v) for j in positions),
                    start=np.zeros(self.rank, dtype=np.int64),
                )
                queries = self._released.tags(combined % self._p)
                found.append(AtomDisclosure(-1, int(rows.size), units, queries, atoms=pair))
        return found

    def determined(self) -> list[AtomDisclosure]:
        """Every atom whose total is derivable now, whatever its size (the offline audit's view)."""
        found = []
        for position in np.flatnonzero(self._basis.derivable()):
            atom = int(self._basis.atoms[position])
            queries = self._released.tags(self._basis.inverse_row(int(position)))
            found.append(
                AtomDisclosure(atom, self._partition.size(atom), self._partition.units(atom), queries)
            )
        return found

    # -- reading a step ------------------------------------------------------------------

    def _newly_derivable(self, growth: Growth) -> Ids:
        """Basis positions (r = the new atom) derivable after the step but not, as is, before."""
        r = self.rank
        fresh = np.ones(r + 1, dtype=bool)
        fresh[:r] = ~self._basis.derivable()
        fresh[growth.changed] = True
        return np.flatnonzero(~growth.y.any(axis=1) & fresh)

    def _tentative_atom(self, cut: Refinement, atom: int) -> tuple[RowIds, int]:
        """Rows and units of ``atom`` as it would be after the cut."""
        rows = tentative_atom(self._partition, cut, atom)
        child = np.flatnonzero(cut.children == atom)
        if child.size:
            return rows, int(cut.inside_units[child[0]])
        parent = np.flatnonzero(cut.split == atom)
        if parent.size:
            return rows, int(cut.outside_units[int(parent[0])])
        return rows, self._partition.units(atom)
