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
  ``s``), ``p``'s levels must still be reached with ``s`` published (what its
  contributor knows). Deviations that leave ``s`` in place prove it for most pairs at
  once (:class:`~guard.suppression.insiders.InsiderProver`); the pairs left get an
  interval LP each, and where one falls short, more cells are withheld (the
  heuristic, with ``s`` known) until it does not.

Both only ever withhold more, so the outsider's intervals stay as proven. Insiders'
knowledge is limited here to their own singleton cells (each contributor of a larger
cell knows only their own share, which the rules' protection levels already model).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Set

import numpy as np

from guard.arrays import distinct
from guard.suppression.audit import failures
from guard.suppression.certificates import Certificates
from guard.suppression.entries import linked_labels, positions
from guard.suppression.heuristic import solve_heuristic
from guard.suppression.insiders import MAX_PIVOT_WORK, InsiderProver, insider_levels, same_unit
from guard.suppression.model import Levels, Protection, ProtectionInfeasible, ProtectionUnverified
from guard.suppression.smallest import SmallestDeviation
from guard.suppression.table import Table
from guard.suppression.widest import within_widest

__all__ = ["EXACT_INSIDER_LIMIT", "insider_reach", "protect_singletons", "relation_violations"]

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
    return _violations(table, hidden, same_unit(table, singletons), guarded)


def _violations(
    table: Table, hidden: Set[int], group: dict[int, frozenset[int]], guarded: Set[int] | None
) -> list[int]:
    """:func:`relation_violations` with the singletons' classes already found."""
    return [r for r, cells in enumerate(table.relation_cells) if _recovered(cells, hidden, group, guarded)]


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
    unasked: Set[int] = frozenset(),
    rounds: int = 50,
) -> frozenset[int]:
    """``hidden`` grown until no relation breaks the relation rule and every sensitive
    cell next to a withheld singleton keeps its levels against that singleton's
    contributor. ``guarded``: the cells no insider may recover exactly (the answer's
    own, those withheld before, the sensitive ones; None: every cell).
    ``certificates``: verified deviations of ``table`` (e.g. those that proved the
    outsider's intervals); one that moves no cell an insider knows proves a sensitive
    cell's levels against that insider without an LP. ``unasked``: sensitive cells no
    answer holds (:mod:`~guard.suppression.widest`): what the ``kept`` cells already
    tell an insider of them is not this pattern's to hide, only what it would add.

    Raises:
        ProtectionInfeasible: a relation has no cell left to withhold (all published
            cells are ``kept``) and lets an insider recover a cell other than an
            ``unasked`` one, or the insider audit still fails after ``rounds``.
    """
    group = same_unit(table, singletons)
    current = set(hidden)
    # the pattern only grows from here: what proves it now proves it throughout
    local = None if certificates is None else certificates.inside(current, watch=singletons)
    for _ in range(rounds):
        grown = _relation_rule(table, current, singletons, costs, kept, guarded, unasked)
        grown = _insider_audit(table, grown, group, levels, costs, kept, local, unasked)
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
    unasked: Set[int],
) -> set[int]:
    current = set(hidden)
    group = same_unit(table, singletons)
    settled: set[int] = set()
    while True:
        broken = [r for r in _violations(table, current, group, guarded) if r not in settled]
        if not broken:
            return current
        r = broken[0]  # one cell at a time: it may mend other relations too
        free = [c for c in table.relation_cells[r] if c not in current and c not in kept]
        if free:
            current.add(min(free, key=lambda c: (costs[c], c)))
            continue
        recovered = _recovered(table.relation_cells[r], current, group, guarded)
        if recovered and recovered <= unasked:
            # every other cell was published earlier: she recovers it from the earlier
            # releases alone, whatever this pattern withholds (see guard.suppression.widest)
            settled.add(r)
            continue
        raise ProtectionInfeasible(
            f"a relation of total {table.relations[r].total!r} would let a single contributor recover "
            "a withheld cell, and it has no other cell left to withhold"
        )


def _recovered(
    cells: Iterable[int], hidden: Set[int], group: dict[int, frozenset[int]], guarded: Set[int] | None
) -> set[int]:
    """The withheld cells of one relation (guarded ones, unless ``guarded`` is None) that
    the contributor of a withheld singleton in it recovers: the only other withheld cell."""
    withheld = {c for c in cells if c in hidden}
    found: set[int] = set()
    for known in {group[c] for c in withheld if c in group}:
        unknown = withheld - known
        if len(unknown) == 1 and (guarded is None or not unknown.isdisjoint(guarded)):
            found |= unknown
    return found


def _insider_audit(
    table: Table,
    hidden: set[int],
    group: dict[int, frozenset[int]],
    levels: Levels,
    costs: np.ndarray,
    kept: Set[int],
    certificates: Certificates | None,
    unasked: Set[int],
) -> set[int]:
    current = set(hidden)
    links = _links(table)
    whole = len(table) <= EXACT_INSIDER_LIMIT
    insiders = sorted({group[c] for c in current if c in group}, key=min)
    around = insider_reach(table, current) if whole else None
    reach = {
        known: (around(known) if around is not None else _next_to(table, links, known)) - known
        for known in insiders
    }
    if certificates is not None:
        _prove_against_insiders(table, current, group, levels, reach, certificates)
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
        if unasked:
            # what the earlier releases alone tell her of a cell nobody asked for
            needed = within_widest(table, needed, unasked & set(needed), kept, known)
            needed = {p: lv for p, lv in needed.items() if max(lv) > 0}
            if not needed:
                continue
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


def _prove_against_insiders(
    table: Table,
    hidden: set[int],
    group: dict[int, frozenset[int]],
    levels: Levels,
    reach: dict[frozenset[int], set[int]],
    certificates: Certificates,
) -> None:
    """Add to ``certificates`` deviations of the pattern ``hidden`` that prove each
    sensitive cell's levels against the insiders whose knowledge reaches it
    (:class:`~guard.suppression.insiders.InsiderProver`: the smallest deviation holds
    against every insider it leaves in place, and only those it moves need another),
    within :data:`~guard.suppression.insiders.MAX_PIVOT_WORK`. What is left unproven is
    audited per insider below."""
    insiders = sorted(reach, key=min)
    near = {p for cells in reach.values() for p in cells} & set(levels)
    if not near:
        return
    lp = SmallestDeviation(table, hidden)
    prover = InsiderProver(table, lp, certificates, None, MAX_PIVOT_WORK // max(1, len(table)))
    for p in sorted(near, key=lambda p: (-max(levels[p]), p)):
        own = group.get(p, frozenset({p}))
        prover.proven(p, levels[p], [g for g in insiders if g != own and p in reach[g]])


def insider_reach(table: Table, hidden: Set[int]) -> Callable[[frozenset[int]], set[int]]:
    """``reach(start)``: the cells an insider's knowledge of ``start`` (withheld cells)
    can move, those linked to it through relations, walking on withheld cells (a
    published cell is fixed for everyone already): every cell of a relation that holds
    a withheld cell connected to ``start``. The connected parts of the graph of
    relations and their withheld cells are found once (scipy), so each insider costs the
    size of her answer, not a walk over the table."""
    cells = np.fromiter(sorted(hidden), dtype=np.int64, count=len(hidden))
    cell_label, relation_label = linked_labels(table.csc, cells)
    label_of = dict(zip(cells.tolist(), cell_label.tolist(), strict=True))
    around: dict[int, set[int]] = {}
    for r in distinct(table.csc.indices[positions(table.csc.indptr, cells)]).tolist():
        around.setdefault(int(relation_label[r]), set()).update(table.relation_cells[r])

    def reach(start: frozenset[int]) -> set[int]:
        found = set(start)
        for part in {label_of[c] for c in start if c in label_of}:
            found |= around.get(part, set())
        return found

    return reach


def _next_to(table: Table, links: dict[int, list[int]], start: frozenset[int]) -> set[int]:
    """The cells that share a relation with a cell of ``start`` (those cells included)."""
    relations = {r for c in start for r in links.get(c, ())}
    return {c for r in relations for c in table.relation_cells[r]}


def _links(table: Table) -> dict[int, list[int]]:
    """The relations each cell is in (cell to cell neighbour sets would be quadratic in
    a total's members)."""
    out: dict[int, list[int]] = {}
    for r, cells in enumerate(table.relation_cells):
        for c in cells:
            out.setdefault(c, []).append(r)
    return out
