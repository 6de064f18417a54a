"""An exact rational oracle for the span audit: Gaussian elimination with Fractions over rows.

Slow and simple on purpose; it knows nothing of atoms, bases or primes.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction


class RationalSpan:
    """The row span of released 0/1 query vectors over a table's rows, kept in reduced form."""

    def __init__(self, n_rows: int) -> None:
        self.n_rows = n_rows
        self.pivots: dict[int, list[Fraction]] = {}
        self.released: list[frozenset[int]] = []

    def _vector(self, rows: Sequence[int] | frozenset[int]) -> list[Fraction]:
        vec = [Fraction(0)] * self.n_rows
        for r in rows:
            vec[r] = Fraction(1)
        return vec

    def _reduce(self, vec: list[Fraction]) -> list[Fraction]:
        for col, basis_row in self.pivots.items():
            if vec[col]:
                factor = vec[col]
                vec = [a - factor * b for a, b in zip(vec, basis_row, strict=True)]
        return vec

    def contains(self, rows: Sequence[int] | frozenset[int]) -> bool:
        return not any(self._reduce(self._vector(rows)))

    def add(self, rows: Sequence[int] | frozenset[int]) -> bool:
        self.released.append(frozenset(rows))
        vec = self._reduce(self._vector(rows))
        col = next((i for i, a in enumerate(vec) if a), None)
        if col is None:
            return False
        vec = [a / vec[col] for a in vec]
        for other, basis_row in self.pivots.items():
            if basis_row[col]:
                factor = basis_row[col]
                self.pivots[other] = [a - factor * b for a, b in zip(basis_row, vec, strict=True)]
        self.pivots[col] = vec
        return True

    def copy(self) -> RationalSpan:
        twin = RationalSpan(self.n_rows)
        twin.pivots = {c: list(v) for c, v in self.pivots.items()}
        twin.released = list(self.released)
        return twin

    def atoms(self) -> list[frozenset[int]]:
        """Rows grouped by their membership in every released set."""
        groups: dict[tuple[bool, ...], set[int]] = {}
        for r in range(self.n_rows):
            groups.setdefault(tuple(r in q for q in self.released), set()).add(r)
        return [frozenset(g) for g in groups.values()]

    def derivable_atoms(self) -> set[frozenset[int]]:
        return {atom for atom in self.atoms() if self.contains(atom)}
