"""An exact rational oracle for the span audit: Gaussian elimination with Fractions over rows.

Slow and simple on purpose; it knows nothing of atoms, bases or primes.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from itertools import combinations


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


def rational_rank(sets: Sequence[frozenset[int]], columns: Sequence[int]) -> int:
    """The rank over Q of the 0/1 vectors of ``sets`` restricted to ``columns``."""
    span = RationalSpan(len(columns))
    position = {c: i for i, c in enumerate(columns)}
    return sum(span.add([position[r] for r in s if r in position]) for s in sets)


def small_group_exposed(sets: Sequence[frozenset[int]], unit_of_row: Sequence[int], k: int) -> bool:
    """Does the span of ``sets`` hold a nonzero vector whose rows touch fewer than k units?

    Brute force over unit sets: such a vector exists iff deleting the rows of some
    k - 1 units lowers the rank (the span then meets their coordinate subspace).
    """
    units = sorted(set(unit_of_row))
    rows = range(len(unit_of_row))
    full = rational_rank(sets, list(rows))
    size = min(k - 1, len(units))
    for group in combinations(units, size):
        inside = set(group)
        kept = [r for r in rows if unit_of_row[r] not in inside]
        if rational_rank(sets, kept) < full:
            return True
    return False


def meets(span: RationalSpan, columns: frozenset[int]) -> bool:
    """Does ``span`` hold a nonzero vector supported inside ``columns``?

    In reduced echelon form a vector of the span is the combination of the pivot rows
    by its values on the pivot columns, so one supported inside ``columns`` combines only
    rows pivoting there, and exists iff those rows are dependent outside ``columns``.
    """
    rows = [row for pivot, row in span.pivots.items() if pivot in columns]
    if not rows:
        return False
    outside = [c for c in range(span.n_rows) if c not in columns]
    restricted = RationalSpan(len(outside))
    for row in rows:
        restricted_row = [row[c] for c in outside]
        reduced = restricted._reduce(restricted_row)
        col = next((i for i, a in enumerate(reduced) if a), None)
        if col is None:
            return True
        restricted.pivots[col] = [a / reduced[col] for a in reduced]
        for other, basis_row in list(restricted.pivots.items()):
            if other != col and basis_row[col]:
                factor = basis_row[col]
                restricted.pivots[other] = [
                    a - factor * b for a, b in zip(basis_row, restricted.pivots[col], strict=True)
                ]
    return False
