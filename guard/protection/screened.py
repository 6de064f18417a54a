"""What an answer released, for the linked-table history, once the exact history audit
(:mod:`guard.history`, which runs after the suppression) has withheld some of the values
the suppression published.

The history and the next answers' protection problems must see those cells as what
they are: withheld. Recorded as published, they were taken as known to the attacker,
so later tables were protected against a recomputation no one could make (and refused
when that was impossible), and a repeated question audited them again each time. A
key of a quantity is withheld by the audit when every value of that quantity shown in
its row is withheld (one published value, a sum or the average beside it, states it).
"""

from __future__ import annotations

from collections.abc import Mapping

from guard.protection.decide import Decision
from guard.protection.keys import space_of
from guard.query.shape import OutputKind, QueryShape
from guard.state.records import ReleaseStatus
from guard.suppression import Key

__all__ = ["screened_releases"]


def screened_releases(
    decision: Decision, shape: QueryShape, screened: Mapping[tuple[int, int], str]
) -> dict[str, dict[Key, ReleaseStatus]]:
    """``decision.releases`` with the keys the history audit withheld (``screened``: its
    (answer row, output) positions, each with the control that withheld it) marked
    withheld by the history audit with that control (:meth:`ReleaseStatus.by_control`:
    a repeat's note names it again; of a row's several aggregates, the first control)."""
    if not screened:
        return decision.releases
    shown: dict[str, list[int]] = {}  # per quantity: its aggregates the answer shows
    for output in shape.outputs:
        if output.kind is OutputKind.AGGREGATE:
            shown.setdefault(space_of(shape.aggregates[output.index]), []).append(output.index)
    # (grid row, aggregate): the control that withheld it
    by_history = {(decision.order[r], shape.outputs[p].index): c for (r, p), c in screened.items()}
    releases = {space: dict(cells) for space, cells in decision.releases.items()}
    for space, aggregates in shown.items():
        cells = releases.get(space)
        if cells is None:
            continue
        for row in {row for row, a in by_history if a in aggregates}:
            key = decision.keys[row]
            hidden = all((row, a) in by_history or (row, a) in decision.withheld for a in aggregates)
            if hidden and cells.get(key) is ReleaseStatus.PUBLISHED:
                control = min(by_history[(row, a)] for a in aggregates if (row, a) in by_history)
                cells[key] = ReleaseStatus.by_control(control)
    return releases
