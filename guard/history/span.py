"""Exact Audit Expert for SUM / COUNT / AVG: is an atom's total derivable from what was released?

Every released SUM is a 0/1 row over atoms (``atoms.py``); an atom's total is derivable
iff its unit vector lies in the row span of the released rows. AVG released together
with its COUNT is the SUM on the same query set (without the COUNT, auditing it as the
SUM is conservative); COUNT over a sensitive condition is the SUM of an indicator. Keep
one auditor per (data version, table, measure), fed by every analyst who may collude.

Compact scheme (docs/ARCHITECTURE.md). With r independent released rows, keep a basis
B of r atoms whose r x r submatrix M = A[:, B] is invertible, M^-1, secret random row
weights lambda (K copies; an atom's weight is the sum over its rows, so a cut atom's
weight splits exactly), and y = M^-1 w with w_i the weight of query i's non-basis
atoms. Basis atom b_j is derivable iff row j of M^-1 A[:, not B] is zero, i.e. (w.h.p.)
iff y_j = 0 in every copy; non-basis atoms never are. Memory is O(nonzeros of M^-1 +
rows + atoms) (M^-1 is kept sparse, ``sparse.py``), never r x atoms. When an atom is
cut, its column is duplicated into both parts: the outside part keeps the basis role
and y_j grows by the inside part's weight.

A new query that cuts an atom, or covers rows no released query covers, is independent.
Otherwise it is dependent iff its weight minus that of its basis atoms minus q_B . y is
0 in every copy. An independent query adds one basis atom c with q's Schur complement
s != 0 (a bordered, rank-one update of M^-1 and y, in ``basis.py``). The choice of c
avoids reading history in the common cases: part of the never-queried atom (column 0,
so M^-1 a_c = 0) or the inside part of a cut basis atom (M^-1 a_c = e_j); otherwise the
column of c is read from the stored query sets (``released.py``).

Arithmetic is modulo a secret random prime p in [2**49, 2**50), exact for a given p.
The only unsafe error is calling an independent query dependent (it would then be
answered unaudited). Over D decisions with rank at most r its probability is at most
    D * (2**(-32 K) + L / P),
where 2**-32 is the chance that 32-bit random weights hide a nonzero residual,
L = log2(H) / 49 bounds how many primes of 49+ bits divide a nonzero (r+1) x (r+1)
0/1 determinant (H its Hadamard bound), and P ~ 1.6e13 is the number of primes p may
be. For K = 2, r = 1,000: 5e-20 + 5e-12 per decision. A false "derivable" (probability
<= 2**(-32 K) per atom) only refuses a safe query. Decisions read query sets and earlier
releases only, never values: refusals are simulatable.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Hashable

import numpy as np
import numpy.typing as npt
from scipy.sparse import csr_matrix

from guard.history.atoms import AtomPartition, Refinement
from guard.history.basis import DENSE_COLUMN, ZERO_COLUMN, Border, InverseBasis
from guard.history.boxes import BoxCodes
from guard.history.capacity import grown
from guard.history.exposure import Exposure
from guard.history.findings import AtomDisclosure, AtomView, DisclosureReport, SensitivePredicate
from guard.history.known import KnownSets
from guard.history.modular import PRIME_BITS, inverse_mod, is_probable_prime, random_prime, sum_mod
from guard.history.pairs import PairSearch
from guard.history.released import Probe, ReleasedSets
from guard.history.rowsets import QuerySet, as_row_ids
from guard.history.steps import Growth, Ids, Planned, Residues, Step

__all__ = ["AtomDisclosure", "AtomView", "SensitivePredicate", "SpanAuditor"]


# Atoms inside the query tried one by one before the batched search (each costs r lookups).
_QUICK_TRIES = 4


class SpanAuditor(PairSearch, DisclosureReport):
    """Online exact audit of SUM releases over one table's rows (see the module docstring).

    ``unit_of_row[rid]`` gives the privacy unit of each row id ``0 .. N-1``. ``prime``
    (tests only) must be a prime below 2**50; by default a secret one is drawn.
    ``copies`` is K, the number of independent random weightings. ``random_bytes`` is
    the entropy source (``secrets.token_bytes``; tests may pass a seeded one). ``boxes``:
    the rows' dimension values, to keep released sets small (``boxes.py``).
    Not thread-safe: the caller serializes decide-then-release per audit state.
    """

    def __init__(
        self,
        unit_of_row: npt.ArrayLike,
        *,
        prime: int | None = None,
        copies: int = 2,
        random_bytes: Callable[[int], bytes] = secrets.token_bytes,
        boxes: BoxCodes | None = None,
    ) -> None:
        if copies < 1:
            raise ValueError(f"copies={copies}: at least one random weighting is needed")
        if prime is not None and not (prime < 1 << PRIME_BITS and is_probable_prime(prime)):
            raise ValueError(f"prime={prime} is not a prime below 2**{PRIME_BITS}; pass None to draw one")
        self._p = prime if prime is not None else random_prime(random_bytes=random_bytes)
        self._partition = AtomPartition(unit_of_row)
        n_rows = self._partition.row_count
        # 32-bit weights: sums over any table below 2**31 rows stay exact in int64. One
        # contiguous array per copy, because gathering a query's rows per copy is fastest.
        raw = np.frombuffer(random_bytes(4 * n_rows * copies), dtype=np.uint32)
        self._row_weight = raw.reshape(copies, n_rows)
        self._atom_weight = np.zeros((16, copies), dtype=np.int64)
        self._atom_weight[0] = self._row_weight.sum(axis=1, dtype=np.int64) % self._p
        self._basis_pos = np.full(16, -1, dtype=np.int64)  # per atom: its basis position, or -1
        self._basis = InverseBasis(self._p, copies)
        self._released = ReleasedSets(n_rows, boxes)  # the independent released query sets: the rows of M
        self._known = KnownSets(self._released)  # sets in the span: asked again, no step
        self._uncovered: int | None = 0  # the atom no released query touches (column 0)
        self._version = 0
        self._cache: tuple[tuple[int, ...], Step] | None = None  # the last step, by cheap key
        self._plan: Planned | None = None  # the last plan, by the same key
        self._index: dict[int, list[int]] | None = None  # built on the first pair search
        self._cuts = 0  # commits so far: the atoms' representatives change only then
        #: (commits, the atoms' probe, their representatives) as of that many commits
        self._probe: tuple[int, Probe, Ids] | None = None
        # the last step committed and the version it left (``last_change_is``)
        self._committed: tuple[Step, int] | None = None

    @property
    def partition(self) -> AtomPartition:
        """The atoms (read-only for callers: only ``release`` may refine them)."""
        return self._partition

    @property
    def prime(self) -> int:
        return self._p

    @property
    def rank(self) -> int:
        """Number of independent released queries = size of the atom basis (<= atom count)."""
        return self._basis.rank

    def nbytes(self) -> int:
        """Memory of the audit state, O(nonzeros of M^-1 + rows + atoms), without the stored
        query sets."""
        arrays = (self._row_weight, self._atom_weight, self._basis_pos)
        parts = self._partition.nbytes() + self._basis.nbytes() + self._known.nbytes()
        return parts + sum(a.nbytes for a in arrays)

    def history_nbytes(self) -> int:
        """Memory of the stored query sets (bitmaps) and of the index the column lookups read."""
        return self._released.nbytes()

    def exposure(self, query_set: QuerySet) -> Exposure | None:
        """The basis after releasing ``query_set``, to read exactly (None: it is implied)."""
        step = self._step(query_set)
        if step.growth is None:
            return None
        return Exposure(
            self._p, step, step.growth, self._basis, self._partition, self._released, self._probe_now()
        )

    def implied(self, query_set: QuerySet) -> bool:
        """True when the SUM over ``query_set`` follows from earlier releases (answer it, change nothing)."""
        return self._known.lookup(as_row_ids(query_set, self._partition.row_count), self._is_implied)[0]

    def release(self, query_set: QuerySet, tag: Hashable = None) -> bool:
        """Record ``query_set`` as answered; ``tag`` names it in forensics (e.g. the log id).

        Returns False, changing nothing, when the query is implied by earlier releases.
        The caller decides; ``release`` never refuses.
        """
        rows = as_row_ids(query_set, self._partition.row_count)
        implied, key = self._known.lookup(rows, self._is_implied)
        step = None if implied else self._step(rows)
        if step is None or step.growth is None:
            return False
        self._commit(step, step.growth, tag)
        self._known.add_released(key)
        return True

    def basis_atoms(self) -> Ids:
        """The basis atom at each position (a copy)."""
        return self._basis.atoms.copy()

    def in_basis(self, atoms: Ids) -> npt.NDArray[np.bool_]:
        return np.asarray(self._basis_pos[atoms] >= 0, dtype=np.bool_)

    @property
    def version(self) -> int:
        """Releases and exchanges so far: while it stays, so does every verdict on the span."""
        return self._version

    @property
    def basis_changes(self) -> int:
        """Updates of M^-1 so far: a mark for ``row_unchanged_since``."""
        return self._basis.changes

    def row_unchanged_since(self, position: int, mark: int) -> bool:
        """True when row ``position`` of M^-1 is the one it was at ``mark`` (a value of
        ``basis_changes``). Its row of M^-1 A is then the same function of the table's rows:
        a cut atom's parts keep its column on every earlier query, and the new query's
        entry in the row is 0."""
        return self._basis.unchanged_since(position, mark)

    def basis_row(self, position: int) -> Residues:
        """Row ``position`` of M^-1 A on every atom (mod p): the combination of released
        answers that is 1 on that basis atom, 0 on the others."""
        probe = self.atom_probe()
        coefficients = self._basis.inverse_row(position)
        support = np.flatnonzero(coefficients)
        values = np.zeros(self._partition.atom_count, dtype=np.int64)
        if support.size:
            values[probe.order] = self._released.weighted_membership(probe, coefficients, support, self._p)
        return values

    def basis_rows(self, positions: Ids) -> Residues:
        """Rows ``positions`` of M^-1 A on every atom (mod p), dense (len(positions) x
        atoms; for a few positions), each stored set read once for all the rows."""
        positions = np.asarray(positions, dtype=np.int64)
        probe = self.atom_probe()
        owner, query, value = self._basis.inverse_triplets(positions)
        coefficients = csr_matrix((value, (owner, query)), shape=(positions.size, self.rank))
        values = np.zeros((positions.size, self._partition.atom_count), dtype=np.int64)
        values[:, probe.order] = self._released.weighted_rows(coefficients, probe, self._p)
        return values

    def inverse_row(self, position: int) -> Residues:
        """Row ``position`` of M^-1: each released query's coefficient for basis atom ``position``."""
        return self._basis.inverse_row(position)

    def atom_probe(self) -> Probe:
        """Every atom's representative row, prepared for reading the stored sets; kept
        until the partition changes (tidying reads many basis rows in between)."""
        if self._probe is None or self._probe[0] != self._cuts:
            count = self._partition.atom_count
            representatives = self._partition.representatives(np.arange(count, dtype=np.int64))
            last = self._probe
            # only cut atoms' representatives change and new parts' are appended: carried
            # unless most atoms were cut (then building it afresh is cheaper)
            if last is None or 2 * (count - last[2].size) > count:
                probe = Probe.of(representatives)
            else:
                probe = last[1].moved(last[2], representatives)
            self._probe = (self._cuts, probe, representatives)
        return self._probe[1]

    def _probe_now(self) -> Callable[[], Probe]:
        """``atom_probe`` of the partition as it is now, for an exposure to build when it
        reads rows; refused once a release changed the partition (the exposure is stale)."""
        cuts = self._cuts

        def probe() -> Probe:
            if self._cuts != cuts:
                raise RuntimeError("stale exposure: the auditor released a query since it was made")
            return self.atom_probe()

        return probe

    def last_change_is(self, step: Step) -> bool:
        """True when ``step`` (this object) was the last release and nothing changed
        since (no release, no exchange): the basis is then the one its exposure read."""
        committed = self._committed
        return committed is not None and committed[0] is step and committed[1] == self._version

    def exchange(self, position: int, atom: int) -> None:
        """Make non-basis ``atom`` the basis atom at ``position`` (its row must be nonzero there)."""
        if self._basis_pos[atom] >= 0:
            raise ValueError(f"atom {atom} is already in the basis")
        x = self._basis.solve(self._column(atom))
        if not x[position]:
            raise ValueError(f"atom {atom} cannot replace basis position {position}: its row is 0 there")
        leaving = int(self._basis.atoms[position])
        weight_out, weight_in = self._atom_weight[leaving].copy(), self._atom_weight[atom].copy()
        self._basis.exchange(position, atom, x, weight_out, weight_in)
        self._basis_pos[leaving], self._basis_pos[atom] = -1, position
        self._reindex(leaving, None, int(weight_out[0]))
        self._reindex(atom, int(weight_in[0]), None)
        self._version += 1
        self._cache = None

    # -- the tentative step ------------------------------------------------------------

    def _step(self, query_set: QuerySet) -> Step:
        """The step for ``query_set``; implied / would_disclose / release of one set share it."""
        plan = self._planned(as_row_ids(query_set, self._partition.row_count))
        if self._cache is not None and self._cache[0] == plan.key:
            return self._cache[1]
        step = Step(plan.cut, plan.in_query, None if plan.implied else self._growth(plan))
        self._cache = (plan.key, step)
        return step

    def _is_implied(self, rows: Ids) -> bool:
        return self._planned(rows).implied

    def _planned(self, rows: Ids) -> Planned:
        """The plan of ``rows`` (sorted, distinct, checked by the caller)."""
        sums = [int(weights[rows].sum(dtype=np.int64)) for weights in self._row_weight]
        # Two different sets share size and exact secret weight sums w.p. <= 2**(-32 K).
        key = (self._version, rows.size, *sums)
        if self._plan is not None and self._plan.key == key:
            return self._plan
        p, cut = self._p, self._partition.plan(rows)
        whole_pos = self._basis_pos[cut.whole]
        in_query = whole_pos[whole_pos >= 0]
        query_weight = np.array(sums, dtype=np.int64) % p
        basis_weight = sum_mod(self._atom_weight[self._atoms_at(in_query)], p)
        implied = not cut.cuts_anything and not self._opens_new_rows(cut)
        if implied:  # then iff its weight less its basis atoms' and q_B . y is 0 in every copy
            implied = not ((query_weight - basis_weight - sum_mod(self._basis.y[in_query], p)) % p).any()
        self._plan = Planned(key, cut, in_query, query_weight, basis_weight, implied)
        return self._plan

    def _growth(self, plan: Planned) -> Growth:
        p, cut, in_query, basis_weight = self._p, plan.cut, plan.in_query, plan.basis_weight
        weight_in = cut.group_sums(self._row_weight) % p
        weight_out = (self._atom_weight[cut.split] - weight_in) % p
        # A cut basis atom keeps its column; its inside part joins the non-basis weights.
        y = self._basis.y.copy()
        cut_pos = self._basis_pos[cut.split]
        y[cut_pos[cut_pos >= 0]] = (y[cut_pos[cut_pos >= 0]] + weight_in[cut_pos >= 0]) % p

        new_atom, new_weight, new_in_query, border = self._new_basis_atom(
            cut, in_query, weight_in, weight_out
        )
        outside = (plan.query_weight - basis_weight - (new_weight if new_in_query else 0)) % p
        return Growth(
            weight_in=weight_in,
            weight_out=weight_out,
            new_atom=new_atom,
            border=border,
            y=self._basis.bordered_y(y, border, new_weight, in_query, outside),
            changed=np.append(cut_pos[cut_pos >= 0], self.rank),
        )

    def _new_basis_atom(
        self, cut: Refinement, in_query: Ids, weight_in: Residues, weight_out: Residues
    ) -> tuple[int, Residues, bool, Border]:
        """(c, weight of c, whether c is in the query, its border) with Schur complement != 0."""
        p = self._p
        u = np.zeros(self.rank, dtype=np.int64)
        uncovered = self._uncovered
        if uncovered is not None and uncovered in cut.whole:  # a_c = 0: u = 0, s = 1
            return uncovered, self._atom_weight[uncovered], True, Border(u, ZERO_COLUMN, 1)
        if uncovered is not None and uncovered in cut.split:
            i = int(np.flatnonzero(cut.split == uncovered)[0])
            return int(cut.children[i]), weight_in[i], True, Border(u, ZERO_COLUMN, 1)
        cut_pos = self._basis_pos[cut.split]
        if (cut_pos >= 0).any():  # inside part of basis atom j: a_c = M[:, j], u = e_j, s = 1
            i = int(np.flatnonzero(cut_pos >= 0)[0])
            u[cut_pos[i]] = 1
            return int(cut.children[i]), weight_in[i], True, Border(u, int(cut_pos[i]), 1)
        if cut.cuts_anything:
            # Both parts share the cut atom's column, and their Schur complements differ by 1.
            u = self._basis.solve(self._column(int(cut.split[0])))
            q_u = int(sum_mod(u[in_query], p))
            if (1 - q_u) % p:
                return (
                    int(cut.children[0]),
                    weight_in[0],
                    True,
                    Border(u, DENSE_COLUMN, inverse_mod(1 - q_u, p)),
                )
            return int(cut.split[0]), weight_out[0], False, Border(u, DENSE_COLUMN, inverse_mod(-q_u, p))
        atom = self._unexplained_atom(cut, in_query)
        u = self._basis.solve(self._column(atom))
        in_q = bool(np.isin(atom, cut.whole))
        schur = int(in_q) - int(sum_mod(u[in_query], p))
        return atom, self._atom_weight[atom], in_q, Border(u, DENSE_COLUMN, inverse_mod(schur, p))

    def _unexplained_atom(self, cut: Refinement, in_query: Ids) -> int:
        """A non-basis atom c where z = q - q_B M^-1 A is nonzero; one exists since q is independent.

        Only queries that cut nothing and cover no new rows get here. z_c = [c in q] - v . a_c
        with v = q_B M^-1, and a_c needs only the released sets where v is nonzero. The
        atoms inside the query are tried first (few, and usually enough), then all others.
        """
        p = self._p
        v = self._basis.combine(in_query)
        free = self._basis_pos[: self._partition.atom_count] < 0
        inside = cut.whole[free[cut.whole]]
        for atom in inside[:_QUICK_TRIES]:
            if (1 - int(sum_mod(v[self._column(int(atom))], p))) % p:
                return int(atom)
        support = np.flatnonzero(v)
        found = self._first_unexplained(inside[_QUICK_TRIES:], 1, v, support)
        if found is None:
            free[cut.whole] = False
            found = self._first_unexplained(np.flatnonzero(free), 0, v, support)
        if found is None:
            raise RuntimeError("span audit invariant broken: an independent query has no free atom")
        return found

    def _first_unexplained(self, atoms: Ids, in_query: int, v: Residues, support: Ids) -> int | None:
        """The first of ``atoms`` (all in, or all out of, the query) with z_c != 0, if any."""
        if not atoms.size:
            return None
        probe = Probe.of(self._partition.representatives(atoms))
        explained = self._released.weighted_membership(probe, v, support, self._p)
        unexplained = np.flatnonzero((in_query - explained) % self._p)  # in the probe's row order
        return int(atoms[probe.order[unexplained[0]]]) if unexplained.size else None

    def _column(self, atom: int) -> npt.NDArray[np.bool_]:
        """a: which independent released queries contain ``atom`` (read from the stored sets)."""
        return self._released.column(self._partition.representative(atom))

    def _atoms_at(self, positions: Ids) -> Ids:
        return self._basis.atoms[positions] if positions.size else positions

    def _opens_new_rows(self, cut: Refinement) -> bool:
        """The query covers rows no released query covers (so it cannot be implied)."""
        return self._uncovered is not None and (self._uncovered in cut.whole or self._uncovered in cut.split)

    def _commit(self, step: Step, growth: Growth, tag: Hashable) -> None:
        cut = step.cut
        v = self._basis.combine(step.in_query)  # before the basis grows
        if self._index is not None:
            self._update_index(cut, growth)
        self._partition.apply(cut)
        self._atom_weight = grown(self._atom_weight, self._partition.atom_count, 0, self._partition.row_count)
        self._basis_pos = grown(self._basis_pos, self._partition.atom_count, -1, self._partition.row_count)
        self._atom_weight[cut.children] = growth.weight_in
        self._atom_weight[cut.split] = growth.weight_out
        self._basis_pos[cut.children] = -1
        self._basis_pos[growth.new_atom] = self.rank
        self._basis.extend(growth.new_atom, growth.border, v, growth.y)
        if self._uncovered is not None and self._uncovered in cut.whole:
            self._uncovered = None
        self._released.append(cut.rows, tag)
        self._version += 1
        self._cuts += 1
        self._cache = None
        self._committed = (step, self._version)
