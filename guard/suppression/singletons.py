"""Singleton-aware suppression: protection that holds against the respondents who know
a withheld cell because they are its only contributor.

A withheld cell with a single contributor (a *singleton*) is no secret to that
contributor: its value is their own. The intervals the outsider audit proves assume
every withheld cell unknown, so an insider can do better:

* **Relation rule** (sdcTable's ``detectSingletons``, tau-ARGUS's singleton options):
  in a relation ``total = Σ members`` whose withheld cells are a singleton's and exactly
  one other cell, the singleton's contributor subtracts what they know and recovers
  that other cell exactly. When that cell is guarded (sensitive, by default), the
  relation gets one more withheld cell, the cheapest one it still publishes. Recovering
  a cell no rule protects tells the insider nothing about anyone else (it is their own
  value plus published ones), unless it helps pin a sensitive cell: the insider audit
  covers that.
* **Insider audit**: for each withheld singleton ``s`` and each sensitive cell ``p`` its
  knowledge can reach through relations of withheld cells (tables up to
  :data:`EXACT_INSIDER_LIMIT` cells; larger ones: the cells sharing a relation with
  ``s``), ``p``'s feasibility interval is computed with ``s`` published (what its
  contributor knows) and must still reach ``p``'s levels; where it does not, more
  cells are withheld (the heuristic, with ``s`` known) until it does.

Both only ever withhold more, so the outsider's intervals stay as proven. Insiders'
knowledge is limited here to their own singleton cells (each contributor of a larger
cell knows only their own share, which the rules' protection levels already model).
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import replace

import numpy as np

from guard.suppression.audit import failures
from guard.suppression.certificates import Certificates
from guard.suppression.deviation import DeviationProblem, cheapest_deviation
from guard.suppression.heuristic import solve_heuristic
from guard.suppression.model import Levels, Protection, ProtectionInfeasible, ProtectionUnverified
from guard.suppression.table import TOTAL, Key, Table

__all__ = ["EXACT_INSIDER_LIMIT", "insider_levels", "protect_singletons", "relation_violations", "same_unit"]

#: tables up to this many cells get the insider audit of every sensitive cell an
#: insider's knowledge can reach; larger ones only of the cells sharing a relation with
#: the singleton (two LPs per sensitive cell per insider: minutes on a 10 000-cell table)
EXACT_INSIDER_LIMIT = 2_500
#: sensitive cells the insider audit of one pattern may check by LP (summed over
#: insiders, two LPs each; pairs proven by a certificate are free); beyond, the answer
#: is refused rather than released partly audited
MAX_INSIDER_AUDITS = 500


def relation_violations(
    table: Table, hidden: Set[int], singletons: Set[int], guarded: Set[int] | None = None
) -> list[int]:
    """Indexes of the relations in which the contributor of a withheld singleton (who
    knows it, and every singleton nested with it) sees exactly one other withheld cell:
    that cell is recoverable by them. Only cells in ``guarded`` count (None: all); a
    cell nobody asked for and no rule protects may be recovered."""
    group = same_unit(table, singletons)
    found = []
    for r, cells in enumerate(table.relation_cells):
        withheld = {c for c in cells if c in hidden}
        for known in {group[c] for c in withheld if c in group}:
            unknown = withheld - known
            if len(unknown) == 1 and (guarded is None or not unknown.isdisjoint(guarded)):
                found.append(r)
                break
    return found


def protect_singletons(
    table: Table,
    hidden: frozenset[int],
    singletons: Set[int],
    levels: Levels,
    costs: np.ndarray,
    kept: Set[int],
    *,
    guarded: Set[int] | None = None,
    certificates: Certificates | None = None,
    rounds: int = 50,
) -> frozenset[int]:
    """``hidden`` grown until no relation breaks the relation rule and every sensitive
    cell next to a withheld singleton keeps its levels against that singleton's
    contributor. ``guarded``: the cells no insider may recover exactly (the answer's
    own, those withheld before, the sensitive ones; None: every cell).
    ``certificates``: verified deviations of ``table`` (e.g. those that proved the
    outsider's intervals); one that moves no cell an insider knows proves a sensitive
    cell's levels against that insider without an LP.

    Raises:
        ProtectionInfeasible: a relation has no cell left to withhold (all published
            cells are ``kept``), or the insider audit still fails after ``rounds``.
    """
    group = same_unit(table, singletons)
    current = set(hidden)
    # the pattern only grows from here: what proves it now proves it throughout
    local = None if certificates is None else certificates.inside(current, watch=singletons)
    for _ in range(rounds):
        grown = _relation_rule(table, current, singletons, costs, kept, guarded)
        grown = _insider_audit(table, grown, group, levels, costs, kept, local)
        if grown == current:
            if certificates is not None and local is not None:
                certificates.absorb(local)  # the insiders' proofs serve the next pattern too
            return frozenset(current)
        current = grown
    raise ProtectionInfeasible(f"singleton protection did not settle in {rounds} rounds")


def _relation_rule(
    table: Table,
    hidden: set[int],
    singletons: Set[int],
    costs: np.ndarray,
    kept: Set[int],
    guarded: Set[int] | None,
) -> set[int]:
    current = set(hidden)
    while True:
        broken = relation_violations(table, current, singletons, guarded)
        if not broken:
            return current
        for r in broken[:1]:  # one cell at a time: it may mend other relations too
            relation = table.relations[r]
            free = [c for c in table.relation_cells[r] if c not in current and c not in kept]
            if not free:
                raise ProtectionInfeasible(
                    f"a relation of total {relation.total!r} would let a single contributor recover a "
                    "withheld cell, and it has no other cell left to withhold"
                )
            current.add(min(free, key=lambda c: (costs[c], c)))


def _insider_audit(
    table: Table,
    hidden: set[int],
    group: dict[int, frozenset[int]],
    levels: Levels,
    costs: np.ndarray,
    kept: Set[int],
    certificates: Certificates | None,
) -> set[int]:
    current = set(hidden)
    links = _links(table)
    whole = len(table) <= EXACT_INSIDER_LIMIT
    insiders = sorted({group[c] for c in current if c in group}, key=min)
    reach = {
        known: (_reach(table, links, known, current) if whole else _next_to(table, links, known)) - known
        for known in insiders
    }
    if certificates is not None:
        _prove_for_every_insider(table, current, group, levels, set().union(*reach.values()), certificates)
    audited = 0
    for known in insiders:
        near = {p: insider_levels(table, p, lv, known) for p, lv in levels.items() if p in reach[known]}
        if certificates is not None:
            # a deviation that leaves the insider's cells where they are is one she
            # cannot rule out either
            near = {p: lv for p, lv in near.items() if not certificates.proven(p, lv, avoid=known)}
        if not near:
            continue
        audited += len(near)
        if audited > MAX_INSIDER_AUDITS:
            # fail closed: a pattern whose insiders were not all audited is not released
            raise ProtectionUnverified(
                "the insider audit of single-contributor cells did not finish within its budget"
            )
        published = current - known
        requirements = {table.keys[p]: Protection(*lv) for p, lv in near.items()}
        short = failures(table, [table.keys[i] for i in published], requirements)
        if not short:
            continue
        needed = {table.index(f.key): near[table.index(f.key)] for f in short}
        repaired = solve_heuristic(
            table,
            needed,
            costs,
            Certificates(table),
            suppressed=frozenset(published),
            kept=frozenset(kept) | known,
        )
        current = set(repaired) | (current & known)
    return current


def _prove_for_every_insider(
    table: Table,
    hidden: set[int],
    group: dict[int, frozenset[int]],
    levels: Levels,
    near: set[int],
    certificates: Certificates,
) -> None:
    """Add to ``certificates``, for each sensitive cell in ``near`` and each direction
    not yet proven that way, a deviation of the pattern ``hidden`` that moves no
    singleton but the cell itself (and its contributor's other cells): one LP per cell
    and direction proves its levels against every other insider at once, instead of
    one interval LP per insider. Cells with no such deviation are left to the
    per-insider audit."""
    outsiders = _mask(len(table), hidden - set(group))
    base = DeviationProblem.of(table, set())  # each cell's problem fixes its own cells below
    free = np.zeros(len(table))
    for p in sorted(near & set(levels), key=lambda p: (-max(levels[p]), p)):
        others = frozenset(group) - group.get(p, frozenset())
        within = outsiders.copy()
        within[list(group.get(p, {p}))] = True
        problem = replace(base, kept=np.flatnonzero(~within))
        for level, upward in zip(levels[p], (True, False), strict=True):
            if certificates.covers(p, level, upward, avoid=others):
                continue
            deviation = cheapest_deviation(
                problem, free, p, level, upward, hidden=hidden, distant=False, rounds=0
            )
            if deviation is not None:
                support = np.flatnonzero(deviation)
                certificates.add(support, deviation[support], hidden)


def _mask(n: int, cells: Set[int]) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[list(cells)] = True
    return mask


def insider_levels(
    table: Table, p: int, levels: tuple[float, float], known: frozenset[int]
) -> tuple[float, float]:
    """The levels cell ``p`` must keep against the insider who knows ``known``. A cell
    holding the insider's own cell cannot, to her, go below that cell's value (the rest
    is not negative): from that side she learns nothing the bounds did not already tell
    her, so the lower level stops there (it is the rest she must not learn)."""
    upper, lower = levels
    if table.lower[p] < 0:
        return levels
    key = table.keys[p]
    inside = [table.values[c] for c in known if c != p and _holds(key, table.keys[c])]
    if not inside:
        return levels
    return upper, max(0.0, min(lower, table.values[p] - max(inside)))


def _holds(total: Key, member: Key) -> bool:
    """Cell ``total`` holds cell ``member``'s rows (every fixed position agrees)."""
    return all(t is TOTAL or t == m for t, m in zip(total, member, strict=True))


def _reach(table: Table, links: dict[int, list[int]], start: frozenset[int], hidden: set[int]) -> set[int]:
    """Cells an insider's knowledge can move: those linked to ``start`` through relations,
    walking on withheld cells (a published cell is fixed for everyone already). Each
    relation is walked once: a second walk would find only cells already seen."""
    seen = set(start)
    stack = list(start)
    walked: set[int] = set()
    cells = table.relation_cells
    while stack:
        for r in links.get(stack.pop(), ()):
            if r in walked:
                continue
            walked.add(r)
            for other in cells[r]:
                if other not in seen:
                    seen.add(other)
                    if other in hidden:
                        stack.append(other)
    return seen


def _next_to(table: Table, links: dict[int, list[int]], start: frozenset[int]) -> set[int]:
    """The cells that share a relation with a cell of ``start`` (those cells included)."""
    relations = {r for c in start for r in links.get(c, ())}
    return {c for r in relations for c in table.relation_cells[r]}


def same_unit(table: Table, singletons: Set[int]) -> dict[int, frozenset[int]]:
    """Each singleton's class of singletons that surely share its one contributor: a
    total and a member that are both singletons (the member's rows lie in the total,
    which has one contributor). Disjoint singletons are taken to be different people,
    which can only protect more."""
    parent = {c: c for c in singletons}

    def root(c: int) -> int:
        while parent[c] != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    for relation in table.relations:
        total = table.index(relation.total)
        if total not in parent:
            continue
        for member in (table.index(k) for k in relation.members):
            if member in parent:
                parent[root(member)] = root(total)
    classes: dict[int, set[int]] = {}
    for c in singletons:
        classes.setdefault(root(c), set()).add(c)
    return {c: frozenset(classes[root(c)]) for c in singletons}


def _links(table: Table) -> dict[int, list[int]]:
    """The relations each cell is in (cell to cell neighbour sets would be quadratic in
    a total's members)."""
    out: dict[int, list[int]] = {}
    for r, cells in enumerate(table.relation_cells):
        for c in cells:
            out.setdefault(c, []).append(r)
    return out
