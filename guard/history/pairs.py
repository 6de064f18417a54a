"""Unions of two atoms in the span audit: which pairs of atoms a step makes derivable.

A 0/1 combination x of atoms lies in the row span iff x_B M^-1 A_N = x_N, i.e. (w.h.p.
over the secret weights) iff sum_{j in x, basis} y_j = sum_{a in x, not basis}
weight_a in every copy. :class:`PairSearch` is the part of
:class:`~guard.history.span.SpanAuditor` that searches such pairs among the parts a
step moves, with an index of the non-basis atoms by weight kept up to date on commit.
"""

from __future__ import annotations

import numpy as np

from guard.history.atoms import AtomPartition, Refinement
from guard.history.basis import InverseBasis
from guard.history.steps import Growth, Ids, Residues, Step

__all__ = ["PairSearch", "opposite_keys", "weight_of"]

# Moved basis positions compared one by one against every y in the pair search; more are
# searched in one sorted copy of y.
_DIRECT_SEARCHES = 16


class PairSearch:
    """The pair search of a span auditor (a mixin: it reads the auditor's state)."""

    _p: int
    _basis: InverseBasis
    _basis_pos: Ids
    _atom_weight: Residues
    _partition: AtomPartition
    _index: dict[int, list[int]] | None

    def _new_pairs(self, step: Step, growth: Growth) -> list[tuple[tuple[int, int], tuple[int, ...]]]:
        """Pairs of atoms whose union is derivable after ``step`` but not before, with the
        basis positions among them.

        A 0/1 combination x of atoms lies in the row span iff x_B M^-1 A_N = x_N, i.e.
        (w.h.p. over the secret weights) iff sum_{j in x, basis} y_j = sum_{a in x, not
        basis} weight_a in every copy. Two non-basis atoms never qualify (their weights
        are independent and random), so a pair holds a basis atom j and either another,
        j' with y_j + y_j' = 0, or a non-basis atom a with weight_a = y_j.

        That test reads only y and the weights, so a pair none of whose parts the step
        moves (a basis position with the same atom and y, a non-basis atom with the same
        weight) is derivable after iff before: only pairs with a moved part are searched,
        which keeps the search O(moved parts) lookups, not O(r), per decision.
        """
        p = self._p
        r = self._basis.rank
        cut = step.cut
        y = growth.y
        keys = y[:, 0]
        basis_atoms = self._basis.atoms

        def atom_at(position: int) -> int:  # after the step: position r is the new atom
            return growth.new_atom if position == r else int(basis_atoms[position])

        weight_after = {int(a): w for a, w in zip(cut.children, growth.weight_in, strict=True)}
        weight_after.update({int(a): w for a, w in zip(cut.split, growth.weight_out, strict=True)})
        changed = set(weight_after) | {growth.new_atom}
        moved = np.zeros(r + 1, dtype=bool)
        moved[r] = True
        moved[growth.changed] = True
        moved[:r] |= (y[:r] != self._basis.y).any(axis=1)
        # a y_j of 0 is a single derivable atom (reported as such), never half of a pair
        moved_positions = [int(j) for j in np.flatnonzero(moved & (keys != 0))]
        pairs: list[tuple[tuple[int, int], tuple[int, ...]]] = []
        # (moved basis position, unchanged non-basis atom): the index's entries for atoms
        # the step changes are stale, and those are searched from the fresh side below
        index = self._nonbasis_index()
        for j in moved_positions:
            for atom in index.get(int(keys[j]), ()):
                if atom not in changed and np.array_equal(y[j], self._atom_weight[atom]):
                    pairs.append(((atom_at(j), atom), (j,)))
        # (any basis position, non-basis atom whose weight the step changes or creates)
        fresh: dict[int, list[int]] = {}
        for atom, weight in weight_after.items():
            if atom != growth.new_atom and (atom >= self._basis_pos.size or self._basis_pos[atom] < 0):
                fresh.setdefault(int(weight[0]), []).append(atom)
        if fresh:
            candidates = np.flatnonzero(np.isin(keys, np.fromiter(fresh, dtype=np.int64)))
            for j in (int(c) for c in candidates):
                for atom in fresh[int(keys[j])]:
                    if np.array_equal(y[j], weight_after[atom]):
                        pairs.append(((atom_at(j), atom), (j,)))
        # (moved basis position, any other basis position) with y_j + y_j' = 0
        searched: set[tuple[int, int]] = set()
        for first, others in opposite_keys(keys, moved_positions, p):
            for other in others:
                positions = (min(first, other), max(first, other))
                if positions in searched:
                    continue
                searched.add(positions)
                if not ((y[first] + y[other]) % p).any():
                    pairs.append(((atom_at(positions[0]), atom_at(positions[1])), positions))
        parent = {int(c): int(a) for a, c in zip(cut.split, cut.children, strict=True)}
        return [(pair, positions) for pair, positions in pairs if not self._pair_known(pair, parent)]

    def _pair_known(self, pair: tuple[int, int], parent: dict[int, int]) -> bool:
        """The pair's union was derivable before the step. ``parent``: cut part -> the
        atom it was cut from (which keeps its id for the outside part)."""
        first, second = pair
        rejoined = parent.get(first) == second or parent.get(second) == first
        if rejoined:  # the two parts of one cut atom: the old atom itself
            position = int(self._basis_pos[min(pair)])
            return position >= 0 and not self._basis.y[position].any()
        if set(pair) & (set(parent) | set(parent.values())):
            return False  # a cut part's rows are no union of earlier atoms
        total = np.zeros(self._atom_weight.shape[1], dtype=np.int64)
        for atom in pair:
            position = int(self._basis_pos[atom])
            total += self._basis.y[position] if position >= 0 else -self._atom_weight[atom]
        return not (total % self._p).any()

    def _nonbasis_index(self) -> dict[int, list[int]]:
        """First-copy weight -> the non-basis atoms with it (kept up to date by _commit)."""
        if self._index is None:
            self._index = {}
            count = self._partition.atom_count
            for atom in np.flatnonzero(self._basis_pos[:count] < 0):
                self._index.setdefault(int(self._atom_weight[atom, 0]), []).append(int(atom))
        return self._index

    def _update_index(self, cut: Refinement, growth: Growth) -> None:
        """The step's changes to the non-basis atoms: cut ones get new weights, the inside
        parts join, and the atom entering the basis leaves."""
        weights = weight_of(cut, growth)
        for atom in cut.split:
            if self._basis_pos[atom] < 0:
                self._reindex(int(atom), int(self._atom_weight[atom, 0]), weights[int(atom)])
        for atom in cut.children:
            self._reindex(int(atom), None, weights[int(atom)])
        new = growth.new_atom
        if new in weights:
            self._reindex(new, weights[new], None)
        elif self._basis_pos[new] < 0:
            self._reindex(new, int(self._atom_weight[new, 0]), None)

    def _reindex(self, atom: int, old: int | None, new: int | None) -> None:
        if self._index is None:
            return
        if old is not None and atom in self._index.get(old, ()):
            self._index[old].remove(atom)
            if not self._index[old]:
                del self._index[old]
        if new is not None:
            self._index.setdefault(new, []).append(atom)


def opposite_keys(keys: Residues, positions: list[int], p: int) -> list[tuple[int, list[int]]]:
    """Per position j of ``positions``: the positions j' with keys[j'] = -keys[j] mod p
    (only those with any). A few positions compare against every key; many (a dense
    update) search one sorted copy, O(r log r) instead of O(r) each."""
    wanted = (-keys[positions]) % p
    if len(positions) <= _DIRECT_SEARCHES:
        hits = ((j, np.flatnonzero(keys == w)) for j, w in zip(positions, wanted, strict=True))
    else:
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
        low = np.searchsorted(ordered, wanted, side="left")
        high = np.searchsorted(ordered, wanted, side="right")
        hits = ((positions[i], order[low[i] : high[i]]) for i in np.flatnonzero(high > low).tolist())
    return [(j, [int(o) for o in others]) for j, others in hits if len(others)]


def weight_of(cut: Refinement, growth: Growth) -> dict[int, int]:
    """First-copy weight of each atom the step cuts or creates."""
    weights = {int(a): int(w[0]) for a, w in zip(cut.children, growth.weight_in, strict=True)}
    weights.update({int(a): int(w[0]) for a, w in zip(cut.split, growth.weight_out, strict=True)})
    return weights
