"""What the earlier releases alone leave a cell nobody asked for.

A linked answer is protected together with cells no answer released (the common
refinement of the released patterns, :mod:`guard.protection.decide`). Earlier answers
were protected without some of them in view, so a refinement cell can already be
narrower than its levels, for everyone or for a single contributor who knows her own
cell, whatever the new answer does: withholding every one of its cells would not widen
it. Refusing the answer for that protects no one (the earlier answers stay out), and
it would refuse every later answer linked with them.

For such a cell the new answer is held to what it can still lose: its levels are
capped at its interval with every cell but the published ones withheld (the widest
pattern the answer could choose), so the answer must not narrow the cell further than
the earlier releases already do. The cells of the answer itself keep their full levels
(a shortfall there refuses the answer, as before).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set

from guard.suppression.audit import audit
from guard.suppression.model import Levels, Protection, ProtectionLevels, required_levels
from guard.suppression.table import Key, Table

__all__ = ["requirements_within_widest", "within_widest"]

#: relative room left below the widest interval, so that the pattern that must reach
#: it is not refused for the solver's round-off
_SLACK = 1e-6


def within_widest(
    table: Table, levels: Levels, cells: Iterable[int], kept: Set[int], known: Set[int] = frozenset()
) -> Levels:
    """``levels`` with those of ``cells`` capped at their intervals when every cell but
    ``kept`` (published earlier) and ``known`` (an insider's own) is withheld."""
    chosen = sorted(p for p in cells if p in levels)
    if not chosen:
        return dict(levels)
    hidden = [table.keys[i] for i in range(len(table)) if i not in kept and i not in known]
    intervals = audit(table, hidden, cells=[table.keys[p] for p in chosen])
    out = dict(levels)
    for p in chosen:
        low, high = intervals[table.keys[p]]
        value = float(table.values[p])
        slack = _SLACK * max(1.0, abs(value))
        upper, lower = levels[p]
        out[p] = (min(upper, max(0.0, high - value - slack)), min(lower, max(0.0, value - low - slack)))
    return out


def requirements_within_widest(
    table: Table, requirements: Mapping[Key, ProtectionLevels], cells: Iterable[Key], kept: Iterable[Key]
) -> dict[Key, Protection]:
    """``requirements`` (by key) with those of ``cells`` capped as :func:`within_widest`
    caps them against everyone (no insider)."""
    levels = required_levels(table, requirements)
    capped = within_widest(table, levels, (table.index(k) for k in cells), {table.index(k) for k in kept})
    return {table.keys[p]: Protection(*lv) for p, lv in capped.items()}
