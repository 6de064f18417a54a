"""The cells a linked answer is protected together with: what an attacker can write
down from the answer and the earlier releases (:func:`attacker_view`), and which new
cells the published ones already fix (:func:`implied_by`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set

from guard.cells import Cell
from guard.protection.linking import Linking
from guard.protection.relations import lattice, meets, pattern
from guard.state.records import ReleaseStatus
from guard.suppression import Key, Relation

__all__ = ["MAX_REFINEMENT_CELLS", "attacker_view", "implied_by"]

#: largest attacker view (cells) solved with the common refinement of the released
#: patterns; above it only their common margins are added
MAX_REFINEMENT_CELLS = 20_000


def attacker_view(
    space: str, current: Mapping[Key, Cell], history: Mapping[Key, ReleaseStatus], linking: Linking
) -> Mapping[Key, Cell]:
    """The answer's cells, the earlier released cells, and the unreleased cells an
    attacker reasons with: the common margins of released patterns (two margins of one
    table both sum to its total) and, up to :data:`MAX_REFINEMENT_CELLS`, their common
    refinement (every released cell is a sum of non-negative cells of it), so each
    relation an attacker can write down is in the problem."""
    assert linking.fetch is not None
    own = {pattern(k) for k in current}
    released = own | {pattern(k) for k in history}
    full = lattice(released)
    if full == own and not history:
        return current  # one GROUP BY, ROLLUP or CUBE: its patterns are already closed
    filtered = linking.fixed is None  # the answer's own filter applies to every pattern
    got = linking.fetch(space, sorted(full), filtered)
    if len(got) > MAX_REFINEMENT_CELLS:
        # too fine to solve online: keep the common margins only (every exact
        # recomputation by differences is still seen; Fréchet-type bounds are not).
        # Read as their own patterns: the same cells in the same order as those of
        # ``got`` (the engine orders by key values, then totals), and a cached fetch
        # then never builds the whole refinement (``patterns.py``)
        margins = meets(released)
        if margins == own and not history:
            return current
        got = linking.fetch(space, sorted(margins), filtered)
    cells = dict(got)
    cells.update(current)
    return cells


def implied_by(relations: Sequence[Relation], published: Set[Key], cells: Set[Key]) -> frozenset[Key]:
    """The ``cells`` whose value the ``published`` cells fix through the relations: a
    relation all of whose cells but one are known makes that one known (a total from its
    parts, a part from its total and the other parts), repeated until nothing changes.
    Publishing such a cell tells no one anything. (Sound, not complete: a value fixed
    only by several relations together, or by the bounds, is not found; linear in the
    relations, where an LP per cell took seconds on large linked problems.)"""
    if not cells:
        return frozenset()
    known = set(published)
    touching: dict[Key, list[int]] = {}
    for r, relation in enumerate(relations):
        for key in (relation.total, *relation.members):
            touching.setdefault(key, []).append(r)
    pending = list(range(len(relations)))
    while pending:
        relation = relations[pending.pop()]
        unknown = [k for k in (relation.total, *relation.members) if k not in known]
        if len(unknown) == 1:
            known.add(unknown[0])
            pending.extend(touching[unknown[0]])
    return frozenset(cells & known)
