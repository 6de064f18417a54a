"""Groups of fewer than k privacy units: may any combination of answers isolate one?

A disclosure is a nonzero vector v in the span of the released SUMs whose support (the
rows with a nonzero coefficient) touches fewer than k privacy units: the group's total
when v is 0/1, and a relation its members can solve (x1 - x2, 2 x1 + x2) otherwise,
whatever the number of atoms and of rows per unit. Only the new query can complete
one, since every earlier release passed this check; so the question per query is
whether the span *after* it holds such a vector that the span before did not.

Why the search is exact and small. Every nonzero v of the span is a combination of the
basis rows (row j of M'^-1 A' is 1 on basis atom b_j and 0 on the other basis atoms),
and its basis atoms are exactly the positions with a nonzero coefficient. A small group
touches no atom holding k or more units, so only the basis positions whose atom is
*small* (fewer than k units) can appear, and when there are none, nothing can be
disclosed. Otherwise, with X the exact rows of those m positions (``exposure.py``):

1. the combinations c with c^T X = 0 on every large atom form the left null space of an
   m x (large atoms) matrix, found by elimination mod p; if it is {0}, nothing can be
   (a row alone nonzero in a large column is in none: when each row with a nonzero
   coefficient on the new query is, shown at a few atoms by ``witness.py``, the check
   ends CLEAR without reading X on every atom);
2. a combination is new iff its coefficient on the new query (c . novelty) is nonzero;
3. any vector is a combination of *circuits* (vectors of minimal support) with supports
   inside its own, so the smallest group is found among the circuits, one per choice of
   d - 1 coordinates set to zero (d the null space's dimension). Each new circuit's
   support is counted in privacy units, by a branch and bound whose lower bound packs
   parity checks of the span (``smallgroup.py``).

When m, the rows' cost, the rows linked to the new query (those left by 1's peeling
and connected to it) or the search's nodes exceed their budgets, the verdict is
EXHAUSTED and the caller withholds: an answer is never released unsearched. Decisions
read query sets only (never values), so a refusal tells nothing the query sets do not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import numpy as np
import numpy.typing as npt
from scipy.sparse import csr_matrix

from guard.arrays import distinct
from guard.history.capacity import grown
from guard.history.csrpick import pick_columns, pick_rows
from guard.history.elimination import combine, combine_sparse, compacted, left_null_space, linked_to, peeled
from guard.history.exposure import Exposure
from guard.history.inside import inside_one_set
from guard.history.modular import inverse_mod, mul_mod
from guard.history.released import ReleasedSets
from guard.history.rowsets import RowIds
from guard.history.smallatoms import SmallAtoms, Units
from guard.history.smallgroup import smallest_group
from guard.history.span import SpanAuditor
from guard.history.steps import Ids, Residues, Step
from guard.history.unitmatrix import UnitMatrix
from guard.history.witness import TIDY_RANKED, first_exchange, largest, witnessed

__all__ = ["MAX_ANSWER_NODES", "GroupFinding", "GroupSearch", "GroupVerdict", "Units", "left_null_space"]

#: small basis positions whose exact rows one decision may read (measured: 0.8-1.7 ms
#: for 400-1,000 positions at 100,000 rows, ~9 ms for ~3,000 at 1M; the work and
#: entries below bound the read too). At 4,000, bench_first's q20 at 100,000 rows came
#: to 4,047 once q19 was answered in full, and was withheld unsearched
MAX_READ_POSITIONS = 16_000
#: linked rows (connected to the new query, not peeled) one decision may eliminate and
#: search: the dense elimination grows with them. A long history keeps thousands of
#: small positions (released cells whose atoms are all small), a check links few (q12
#: of bench_first at 100,000 rows: 1 of 401); counting them all withheld 1,854 safe values
MAX_SMALL_POSITIONS = 400
#: nonzeros of a decision's exact rows, and entries of the dense block it eliminates
MAX_ROW_ENTRIES = 8_000_000
#: bitmap intersections one decision may spend reading those rows
MAX_ROW_WORK = 400_000
#: small basis atoms one release may try to exchange for large ones
MAX_TIDY = 32
#: releases after which a small basis atom that could not be exchanged is tried again
_RETRY_GROWTH = 16
#: atoms above which ``tidy`` reads a row at the largest atoms first rather than all its
#: rows whole together (measured: at 4,096-16,384 atoms, bench_first's q18 and q19 at
#: 100k rows pay 50 ms more reading at the largest atoms; bench_audit at 1M rows pays
#: 2.3 ms a row read whole against 1.0 ms at 16,384-65,536 atoms, 9.2 against 2.1 above)
RANKED_ABOVE = 16_384
#: nodes of the branch and bound one decision may visit (5,000 while each node updated
#: whole matrices and bitmaps per coordinate; the Fair session's Q12 needs ~20,000)
MAX_NODES = 20_000
#: nodes all the cells of one answer may visit together (``GroupSearch.begin_answer``):
#: a table of many cells that each exhaust their budget took minutes (the Fair session's
#: Q14: 28 cells, 390 s); past it a cell's search is over its budget (withheld)
MAX_ANSWER_NODES = 100_000


class GroupVerdict(Enum):
    CLEAR = "clear"
    DISCLOSES = "discloses"
    EXHAUSTED = "exhausted"


@dataclass(frozen=True)
class GroupFinding:
    """The verdict; for DISCLOSES, the rows (auditor row ids) and units of one such group."""

    verdict: GroupVerdict
    rows: RowIds | None = None
    units: int = 0
    #: the disclosed set is a cell the sensitivity rules protect (not a small group)
    sensitive: bool = False


_CLEAR = GroupFinding(GroupVerdict.CLEAR)

#: which of the given atoms are small (``SmallAtoms.classifier``)
SmallOf = Callable[[Ids], npt.NDArray[np.bool_]]


class GroupSearch:
    """The group search of one audit state (see the module docstring).

    ``units`` names and counts the privacy units of sets of auditor row ids; ``k`` is
    the smallest group that may be disclosed. Which atoms are small is remembered per
    committed atom (``smallatoms.py``).
    """

    def __init__(self, k: int, units: Units, sensitive: npt.NDArray[np.int64] | None = None) -> None:
        self.k = k
        #: per auditor row id: the sensitive set (``sensitive.py``) it lies in, or -1
        self._sensitive = sensitive
        #: per basis position, when no large atom could replace its small atom: that atom
        #: (-1: not stuck), the rank then, and ``SpanAuditor.basis_changes`` then
        self._stuck_atom = np.full(16, -1, dtype=np.int64)
        self._stuck_rank = np.zeros(16, dtype=np.int64)
        self._stuck_mark = np.zeros(16, dtype=np.int64)
        #: small atoms, remembered per committed atom (``smallatoms.py``)
        self._small = SmallAtoms(k, units, sensitive)
        #: the step of the last check: once released, ``tidy`` tells ``_small`` its cut
        self._checked: Step | None = None
        #: nodes the current answer may still visit (``begin_answer``)
        self._answer_nodes = MAX_ANSWER_NODES
        #: the exact rows the last check read: (its step, positions, rows), the basis rows
        #: after that step, which ``tidy`` takes when the step was the release just made
        self._read: tuple[Step, Ids, csr_matrix] | None = None
        #: the auditor's stored sets (from the checks' exposures), for ``tidy``'s reads
        #: at a few atoms (``witness.py``)
        self._sets: ReleasedSets | None = None

    def begin_answer(self) -> None:
        """A new answer's cells share ``MAX_ANSWER_NODES`` nodes of search from here."""
        self._answer_nodes = MAX_ANSWER_NODES

    def check(self, exposure: Exposure) -> GroupFinding:
        if self.k <= 1 and self._sensitive is None:
            return _CLEAR  # no group is small and no cell is flagged
        self._checked = exposure.step
        self._read = None
        changed = exposure.changed_atoms()
        cut = exposure.step.cut
        parents = dict(zip(cut.children.tolist(), cut.split.tolist(), strict=True))
        small_of = self._small.classifier(exposure.partition, changed, exposure.rows_of, parents, cut)
        positions = np.flatnonzero(small_of(exposure.basis_atoms())).astype(np.int64)
        novelty = exposure.novelty()[positions]
        if not novelty.any():
            return _CLEAR  # phi = 0 on every combination: nothing new can be small
        if positions.size > MAX_READ_POSITIONS:
            return GroupFinding(GroupVerdict.EXHAUSTED)
        self._sets = exposure.released
        if witnessed(exposure, positions, novelty, small_of, MAX_ROW_WORK, MAX_ROW_ENTRIES):
            return _CLEAR  # what the peeling below would conclude, from a few atoms
        rows, work = exposure.rows_exactly(positions)  # sparse: positions x atoms
        if work > MAX_ROW_WORK or rows.nnz > MAX_ROW_ENTRIES:
            return GroupFinding(GroupVerdict.EXHAUSTED)
        self._read = (exposure.step, positions, rows)
        p = exposure.p
        touched, rows = compacted(rows)  # columns: the touched atoms, in order
        small = small_of(touched)
        large = np.flatnonzero(~small)
        # a smallest new vector lives in one connected part, of the rows the peeling
        # leaves, that holds a new query's row: no combination uses a peeled row, and the
        # parts split any vector into pieces on disjoint atoms, one new and no larger
        # (q19 at 100,000 rows: 1,500-2,000 rows linked through all, 821 through these)
        rows_on_large = pick_columns(rows, large)
        alive = np.flatnonzero(peeled(rows_on_large))
        keep = np.zeros(novelty.size, dtype=bool)
        keep[alive] = linked_to(pick_rows(rows, alive), novelty[alive] != 0)
        if not (novelty[keep]).any():
            return _CLEAR
        if np.count_nonzero(keep) > MAX_SMALL_POSITIONS:
            return GroupFinding(GroupVerdict.EXHAUSTED)
        rows, novelty = pick_rows(rows, keep), novelty[keep]
        on_large = pick_rows(rows_on_large, keep)
        on_large = pick_columns(on_large, distinct(on_large.indices))  # zero columns change no elimination
        if on_large.shape[0] * on_large.shape[1] > MAX_ROW_ENTRIES:
            return GroupFinding(GroupVerdict.EXHAUSTED)  # the elimination below is dense
        null = left_null_space(on_large.toarray(), p)
        if not null.shape[0]:
            return _CLEAR
        phi = combine(null, novelty[:, None], p)[:, 0]
        if not phi.any():
            return _CLEAR  # only combinations the earlier answers already held
        # only the small atoms the kept rows touch (the whole read's rows touch 14,000-
        # 29,000 at 100,000 rows, and the dense product over them was q19's first answer)
        on_small = pick_columns(rows, small)
        kept_small = distinct(on_small.indices)
        coordinates = touched[small][kept_small]
        vectors = combine_sparse(null, pick_columns(on_small, kept_small), p)
        # a coordinate where every vector of the span is zero is in no support: many are
        moving = vectors.any(axis=0)
        return self._smallest(exposure, vectors[:, moving], coordinates[moving], phi, coordinates)

    def tidy(self, auditor: SpanAuditor) -> int:
        """After a release: move small atoms out of the basis wherever a large non-basis
        atom can take their place (its row is nonzero there), so that the positions the
        next check must read exactly stay few. Returns the number of exchanges.

        The rows of the positions tried are those the release's check read, else, after a
        check that read none (cleared by witnesses) and over ``RANKED_ABOVE`` atoms, each
        is read at the largest atoms first (``witness.first_exchange``: the same atom as
        reading it whole, from the basis as it is then), else read together (one pass over the stored sets,
        ``SpanAuditor.basis_rows``) and each exchange is then applied to the rows
        not yet visited: after atom a enters at position j, M^-1 changes by
        -(x - e_j) row_j / x_j with x = M^-1 a_col, so row i of M^-1 A becomes
        R_i - R_i[a] R'_j with R'_j = R_j / x_j (x_i = R_i[a]). Exact mod p: the rows are
        those a fresh read would give, and so are the exchanges.

        A position tried again whose atom and row of M^-1 are those it was stuck with is
        stuck again, and its row is not read: its row of M^-1 A is the same function of
        the table's rows (``SpanAuditor.row_unchanged_since``), zero on every large
        non-basis atom then; a large atom now is a part of a large atom then (parts of
        small atoms are small), a basis atom leaving a position was zero in the row, and
        an atom entering one was chosen where the row is zero. So the exchanges, the
        bases and every later decision are those of reading it; only the reads of the
        stored sets (proportional to the history) are saved."""
        partition = auditor.partition
        checked, self._checked = self._checked, None
        if checked is not None and auditor.last_change_is(checked):  # the release was that step
            self._small.released(partition, checked.cut)
        small_of = self._small.classifier(partition, set(), partition.rows)
        atoms = auditor.basis_atoms()
        self._reserve_stuck(atoms.size)
        small = np.flatnonzero(small_of(atoms))
        # a small atom no large atom could replace stays where it is (its row is a
        # combination of answers on small atoms only) until the basis has grown a bit
        waiting = (self._stuck_atom[small] == atoms[small]) & (
            auditor.rank < self._stuck_rank[small] + _RETRY_GROWTH
        )
        tried: list[int] = small[~waiting][:MAX_TIDY].tolist()
        if not tried:
            return 0
        p = auditor.prime
        mark = auditor.basis_changes
        still = {q for q in tried if self._still_stuck(auditor, q, int(atoms[q]))}
        read = [q for q in tried if q not in still]
        rows = self._rows_read(auditor, read)
        if rows is None and read and (self._sets is None or partition.atom_count <= RANKED_ABOVE):
            rows = auditor.basis_rows(np.array(read, dtype=np.int64))
        # rows None: each position's row is read at the largest atoms first (``witness.py``)
        ranked = largest(partition.sizes(), TIDY_RANKED) if rows is None and read else None
        row_of = {q: t for t, q in enumerate(read)}
        entered: list[tuple[int, Ids, Residues]] = []  # (atom, its row's support, values) per exchange
        moved = 0
        for position in tried:
            if position in still:
                self._stick(position, int(atoms[position]), auditor.rank, mark)
                continue
            if ranked is not None:
                chosen = self._exchange_for(auditor, position, ranked, small_of)
            else:
                assert rows is not None
                row = rows[row_of[position]]
                for atom, support, values in entered:
                    factor = int(row[atom])
                    if factor:
                        row[support] = (row[support] - mul_mod(values, factor, p)) % p
                chosen = _largest_candidate(row, auditor, small_of)
            if chosen >= 0:
                auditor.exchange(position, chosen)
                if ranked is None:
                    # scaled by a unit mod the prime: nonzero exactly where the row is, so
                    # only those entries are multiplied (the row spans every atom)
                    support = np.flatnonzero(row).astype(np.int64)
                    scaled = mul_mod(row[support], inverse_mod(int(row[chosen]), p), p)
                    entered.append((chosen, support, scaled))
                self._stuck_atom[position] = -1
                moved += 1
            else:
                self._stick(position, int(atoms[position]), auditor.rank, auditor.basis_changes)
        return moved

    def _exchange_for(self, auditor: SpanAuditor, position: int, ranked: Ids, small_of: SmallOf) -> int:
        """The atom ``tidy`` exchanges for ``position`` (-1: none): its row read at the
        largest atoms first (``witness.first_exchange``), else read whole. Either read is
        of the basis as it is now, which is the row ``tidy`` updates through its earlier
        exchanges."""
        assert self._sets is not None
        partition = auditor.partition

        def candidates(atoms: Ids) -> Ids:
            atoms = atoms[~auditor.in_basis(atoms)]
            return atoms[~small_of(atoms)] if atoms.size else atoms

        coefficients = auditor.inverse_row(position)
        index = np.flatnonzero(coefficients).astype(np.int64)
        line = (index, coefficients[index])
        found = first_exchange(self._sets, line, ranked, candidates, partition.representatives, auditor.prime)
        if found is not None and (found >= 0 or ranked.size == partition.atom_count):
            return found
        row = auditor.basis_rows(np.array([position], dtype=np.int64))[0]
        return _largest_candidate(row, auditor, small_of)

    def _still_stuck(self, auditor: SpanAuditor, position: int, atom: int) -> bool:
        """The position was stuck with this atom and its row of M^-1 has not changed since."""
        return bool(self._stuck_atom[position] == atom) and auditor.row_unchanged_since(
            position, int(self._stuck_mark[position])
        )

    def _stick(self, position: int, atom: int, rank: int, mark: int) -> None:
        self._stuck_atom[position], self._stuck_rank[position], self._stuck_mark[position] = atom, rank, mark

    def _reserve_stuck(self, rank: int) -> None:
        self._stuck_atom = grown(self._stuck_atom, rank, -1)
        self._stuck_rank, self._stuck_mark = grown(self._stuck_rank, rank), grown(self._stuck_mark, rank)

    def _rows_read(self, auditor: SpanAuditor, positions: list[int]) -> Residues | None:
        """The basis rows at ``positions`` (dense, over every atom) from the last check's
        exact rows, when that check's step is the release just made and read them all;
        else None (read them from the stored sets). The same residues either way: both
        are M^-1 A exactly mod p, on the same atoms (tidy re-read every stored set)."""
        read, self._read = self._read, None
        if not positions:
            return None
        if read is None or not auditor.last_change_is(read[0]):
            return None
        _, known, matrix = read
        where = {position: i for i, position in enumerate(known.tolist())}
        if matrix.shape[1] != auditor.partition.atom_count or any(q not in where for q in positions):
            return None
        picked: Residues = pick_rows(matrix, [where[q] for q in positions]).toarray()
        return picked

    def _smallest(
        self, exposure: Exposure, vectors: Residues, coordinates: Ids, phi: Residues, every: Ids
    ) -> GroupFinding:
        """Is there a v in the span of ``vectors`` (rows over the small atoms
        ``coordinates``) with phi(v) != 0 whose support touches fewer than k units?
        ``every``: the small atoms the rows touch, ``coordinates`` among them (a sensitive
        set's finding names all of its atoms there).

        Every such v is, up to scale, v* + w with phi(v*) = 1 and w in V0 = ker phi; the
        branch and bound over the coordinates (zero in v, or in the group with its units
        counted) and its parity-check bound are in ``smallgroup.py``. Over ``MAX_NODES``
        (or the answer's share) the verdict is EXHAUSTED.
        """
        p = exposure.p
        first = int(np.flatnonzero(phi)[0])
        scale = inverse_mod(int(phi[first]), p)
        star = mul_mod(vectors[first], scale, p)
        others = [
            (vectors[i] - mul_mod(star, int(phi[i]), p)) % p for i in range(vectors.shape[0]) if i != first
        ]
        rest = np.array(others, dtype=np.int64).reshape(len(others), vectors.shape[1])
        units = UnitMatrix.of([self._small.counter.unit_ids(exposure.rows_of(int(a))) for a in coordinates])
        allowed = min(MAX_NODES, self._answer_nodes)
        budget = [allowed]
        found = smallest_group(star, rest, units, self.k, p, budget)
        self._answer_nodes -= allowed - max(budget[0], 0)
        if found is None:
            return GroupFinding(GroupVerdict.EXHAUSTED)
        if found is False:
            return self._inside_sensitive(exposure, star, rest, coordinates, every, p)
        support = coordinates[found != 0]
        rows = np.sort(np.concatenate([exposure.rows_of(int(a)) for a in support]))
        return GroupFinding(GroupVerdict.DISCLOSES, rows, self._small.counter.units(rows))

    def _inside_sensitive(
        self, exposure: Exposure, star: Residues, rest: Residues, coordinates: Ids, every: Ids, p: int
    ) -> GroupFinding:
        """Is some v* + w (w in the span of ``rest``) supported inside one sensitive set?
        For each set among the coordinates: the coordinates outside it must all be
        cancelled, a linear system; solvable iff [v*; V0] restricted to them has a left
        null vector with a nonzero first entry."""
        if self._sensitive is None:
            return _CLEAR
        sets = np.array([self._small.set_of(exposure.rows_of(int(a))) for a in coordinates], dtype=np.int64)
        number = inside_one_set(star, rest, sets, p)  # one echelon form for every set
        if number is None:
            return _CLEAR
        every_set = np.array([self._small.set_of(exposure.rows_of(int(a))) for a in every], dtype=np.int64)
        support = every[every_set == number]
        rows = np.sort(np.concatenate([exposure.rows_of(int(a)) for a in support]))
        return GroupFinding(GroupVerdict.DISCLOSES, rows, self._small.counter.units(rows), sensitive=True)


def _largest_candidate(row: Residues, auditor: SpanAuditor, small_of: SmallOf) -> int:
    """The largest large non-basis atom where ``row`` is nonzero (the first by id among
    equal sizes), or -1."""
    candidates = np.flatnonzero(row)
    candidates = candidates[~auditor.in_basis(candidates)]
    large = candidates[~small_of(candidates)] if candidates.size else candidates
    if not large.size:
        return -1
    return int(large[int(np.argmax(auditor.partition.sizes()[large]))])
