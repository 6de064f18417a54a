"""Additive relations in a table's key space: which released patterns an attacker can
combine, and which totals are sums of which members.

A pattern says which dimensions a key fixes. Released patterns close into a lattice:
their meets are common margins (two margins of one table both sum to its total), their
joins common refinements (every released cell is a sum of cells of the refinement).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from guard.cells import Cell
from guard.protection.linking import Pattern
from guard.suppression import TOTAL, Key, Relation

__all__ = ["is_finer", "lattice", "linked_component", "meets", "pattern", "relations_between"]


def pattern(key: Key) -> Pattern:
    """Which positions of ``key`` hold a value (True) rather than a total."""
    return tuple([k is not TOTAL for k in key])  # a list first: faster than a generator


def is_finer(p: Pattern, q: Pattern) -> bool:
    """Cells of pattern ``q`` split cells of pattern ``p`` (q fixes strictly more)."""
    return p != q and all(b or not a for a, b in zip(p, q, strict=True))


def lattice(patterns: set[Pattern]) -> set[Pattern]:
    """``patterns`` closed under meet (common margins) and join (common refinements)."""
    closed = set(patterns)
    while True:
        grown = set()
        for p, q in itertools.combinations(sorted(closed), 2):
            grown.add(tuple(a and b for a, b in zip(p, q, strict=True)))
            grown.add(tuple(a or b for a, b in zip(p, q, strict=True)))
        grown -= closed
        if not grown:
            return closed
        closed |= grown


def meets(patterns: set[Pattern]) -> set[Pattern]:
    closed = set(patterns)
    while True:
        grown = {
            tuple(a and b for a, b in zip(p, q, strict=True)) for p, q in itertools.combinations(closed, 2)
        }
        grown -= closed
        if not grown:
            return closed
        closed |= grown


def relations_between(cells: Mapping[Key, Cell] | Sequence[Key]) -> tuple[Relation, ...]:
    """``total = Σ members`` for each cell and each next finer pattern present.

    Assumes every pattern is complete under each of its totals (true for one GROUP BY
    answer within its filter, and for whole patterns fetched from the data). Patterns
    are linked only to the next finer patterns present (the Hasse diagram), so a grand
    total next to a two-way table without one-way margins still relates to its cells.
    """
    by_pattern: dict[Pattern, list[Key]] = {}
    for key in cells:
        by_pattern.setdefault(pattern(key), []).append(key)
    patterns = sorted(by_pattern)
    relations: list[Relation] = []
    for p in patterns:
        finer = [q for q in patterns if is_finer(p, q)]
        for q in finer:
            if any(is_finer(p, r) and is_finer(r, q) for r in finer):
                continue
            fixed = [i for i, v in enumerate(p) if v]
            members: dict[tuple[object, ...], list[Key]] = {}
            for key in by_pattern[q]:
                members.setdefault(tuple(key[i] for i in fixed), []).append(key)
            for total in by_pattern[p]:
                group = members.get(tuple(total[i] for i in fixed))
                if group:
                    relations.append(Relation(total, tuple(group)))
    return tuple(relations)


def linked_component(
    cells: Mapping[Key, Cell], current: Mapping[Key, Cell], relations: Sequence[Relation]
) -> dict[Key, Cell]:
    """The cells linked to the answer's cells through relations."""
    # cell -> the relations it is in, walked relation by relation: linear in the
    # relations' sizes (cell-to-cell neighbour sets would be quadratic in a total's
    # members, 64M set insertions for an 8,000-cell answer with its grand total)
    relations_of: dict[Key, list[int]] = {}
    for index, relation in enumerate(relations):
        for k in (relation.total, *relation.members):
            relations_of.setdefault(k, []).append(index)
    seen = set(current)
    stack = list(current)
    walked: set[int] = set()
    while stack:
        for index in relations_of.get(stack.pop(), ()):
            if index in walked:
                continue
            walked.add(index)
            relation = relations[index]
            for other in (relation.total, *relation.members):
                if other not in seen:
                    seen.add(other)
                    stack.append(other)
    return {k: cells[k] for k in cells if k in seen}
