"""The exact rows of a group check at a few atoms: a CLEAR by witness columns, and
``tidy``'s exchange without reading every atom.

``groups.py`` reads rows of M'^-1 A' on every atom (``Exposure.rows_exactly``): one
pass over the history's stored sets, each intersected with every atom's representative,
so its cost follows the history, not the answer (at 1M rows, queries 1,700-2,000 of
bench_audit: 58 % of the CPU of the slowest answers). Most of those checks end at the
peeling (measured: 123 of 126 checks that read rows at queries 1,000-1,300), because
each row with a nonzero coefficient on the new query is the only row nonzero in some
large column: ``peeled`` drops it, and no new combination is left. The same rows at a
few hundred atoms cost one intersection of each set with a bitmap of a few hundred rows.

- ``cleared``: the rows at the largest large atoms. When each row with a nonzero
  coefficient on the new query is the only nonzero row in one of those columns, the
  full check would peel it (a row alone in a column among all rows is alone among the
  live ones, and peeling never brings a row back), so it would end CLEAR; the caller
  uses this only where the full check could not end over its budget first. Otherwise
  (no witness) the caller reads every atom, as before.
- ``first_exchange``: ``tidy`` exchanges a small basis atom for the largest large
  non-basis atom (the first by id among equal sizes) where its row is nonzero. The row
  is read at the atoms in that order until one is nonzero: the same atom. Each read
  is of the basis as it is then, which is what ``tidy`` computes by updating the rows it
  read before its exchanges (its docstring). Past ``_MOST_TRIED`` atoms the caller
  reads the whole row.

Both read the rows exactly mod p, as ``rows_exactly`` and ``basis_rows`` do; nothing
here decides on less than they would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.sparse import csr_matrix

from guard.arrays import distinct
from guard.history.exposure import Exposure
from guard.history.modular import ONE_PRODUCT
from guard.history.released import Probe, ReleasedSets, product_mod
from guard.history.rowsets import RowIds
from guard.history.steps import Ids, Residues

__all__ = ["TIDY_RANKED", "cleared", "first_exchange", "largest", "values_at", "witnessed"]

#: the largest atoms a check ranks for witnesses (before keeping the large non-basis ones)
WITNESS_RANKED = 2048
#: the largest atoms ``tidy`` ranks for its exchange (past them, it reads the whole row)
TIDY_RANKED = 8192

#: positions x sets x rows up to which ``values_at`` is one dense product
_DENSE = 1 << 20
#: atoms read together (the largest first)
_BATCH = 256
#: atoms a check reads for witnesses before it reads every atom
_MOST_WITNESSED = 1024
#: atoms ``first_exchange`` reads before the caller reads the whole row
_MOST_TRIED = 4096


def largest(sizes: Ids, count: int) -> Ids:
    """The atoms at least as large as the ``count``-th largest (all of them, ties
    included), by decreasing size, then id: every atom after them is smaller."""
    if count < sizes.size:
        bound = np.partition(sizes, sizes.size - count)[sizes.size - count]
        atoms = np.flatnonzero(sizes >= bound)
    else:
        atoms = np.arange(sizes.size)
    return atoms[np.lexsort((atoms, -sizes[atoms]))].astype(np.int64)


def values_at(released: ReleasedSets, coefficients: csr_matrix, rows: RowIds, p: int) -> Residues:
    """Dense (len(coefficients) x len(rows)): row i, at each of ``rows`` (distinct row
    ids, one per atom), the sum mod p of ``coefficients[i, j]`` (residues, each (i, j)
    stored once) over the sets j that hold it."""
    m = coefficients.shape[0]
    owner = np.repeat(np.arange(m, dtype=np.int64), np.diff(coefficients.indptr))
    return _values(released, m, (owner, coefficients.indices, coefficients.data), rows, p)


def _values(
    released: ReleasedSets, m: int, entries: tuple[Ids, npt.NDArray[Any], Residues], rows: RowIds, p: int
) -> Residues:
    """``values_at`` of the coefficients given as (row, set, residue) entries, each
    (row, set) once. Exact: int64 sums of at most ``ONE_PRODUCT`` residues, else
    ``product_mod``."""
    owner, sets, value = entries
    used, column = np.unique(sets, return_inverse=True)
    if not used.size or not rows.size:
        return np.zeros((m, rows.size), dtype=np.int64)
    sizes, places = released.membership(used.astype(np.int64), Probe.of(rows))
    if m * used.size * rows.size <= _DENSE and used.size <= ONE_PRODUCT:
        # thousands of calls a first answer at a few sets or a few rows each (q12 at 1M:
        # 24,000), where scipy's constructors cost more than the arithmetic: one dense
        # int64 product (no BLAS, whose threads would spin; about 1 ms at the bound),
        # exact as each entry sums at most ONE_PRODUCT residues
        picked = np.zeros((m, used.size), dtype=np.int64)
        picked[owner, column] = value
        member = np.zeros((used.size, rows.size), dtype=np.int64)  # sets x rows, 0/1
        member[np.repeat(np.arange(used.size), sizes), places] = 1
        dense: Residues = (picked @ member) % p
        return dense
    # larger: the sparse exact product (a dense int64 product of thousands of sets x
    # hundreds of rows x hundreds of positions took seconds a check)
    pointer = np.zeros(used.size + 1, dtype=places.dtype)
    np.cumsum(sizes, out=pointer[1:])
    member = csr_matrix((np.ones(places.size, dtype=np.int64), places, pointer), shape=(used.size, rows.size))
    picked = csr_matrix((np.asarray(value, dtype=np.int64), (owner, column)), shape=(m, used.size))
    total: Residues = product_mod(picked, member, p).toarray()
    return total


def witnessed(
    exposure: Exposure,
    positions: Ids,
    novelty: Residues,
    small_of: Callable[[Ids], npt.NDArray[np.bool_]],
    max_work: int,
    max_entries: int,
) -> bool:
    """Whether the group check of ``exposure`` at ``positions`` (``novelty`` theirs)
    ends CLEAR at its peeling, shown by ``cleared`` at the query's atoms, then at the
    largest others. Tried only where reading every
    atom could not end over the check's budget first: the sets it would read (the
    coefficients' columns) within ``max_work``, positions x atoms (a bound on the rows'
    nonzeros) within ``max_entries``."""
    coefficients = exposure.coefficients(positions)
    used = distinct(coefficients.indices).astype(np.int64)
    if not used.size or used.size > max_work or positions.size * exposure.atom_count > max_entries:
        return False
    if exposure.released.kept(used).all():
        # every set is small: reading every atom is one pass over their kept rows, and
        # its rows serve ``tidy`` too; the witness would intersect each set with a few
        # rows, batch after batch, in Python (q12 at 1M rows: 1.9 ms a cleared check
        # against ~1.7 ms for the whole read, then 18,000 exchanges read row by row)
        return False
    partition, cut = exposure.partition, exposure.step.cut
    released, representatives = exposure.released, partition.representatives
    # candidates, most likely first (measured: the lonely columns are mostly the query's
    # atoms): its whole atoms and the parts of those it cuts, then the largest others;
    # each as (the atom after the query, its atom before, inside the query)
    sizes = partition.sizes()
    in_basis = np.zeros(sizes.size, dtype=bool)
    in_basis[exposure.basis.atoms] = True
    whole = cut.whole[~in_basis[cut.whole]]
    whole = whole[np.argsort(-sizes[whole], kind="stable")]
    after = np.concatenate([whole, cut.children, cut.split]).astype(np.int64)
    before = np.concatenate([whole, cut.split, cut.split]).astype(np.int64)
    inside = np.zeros(after.size, dtype=bool)
    inside[: whole.size + cut.children.size] = True
    large = ~small_of(after)
    if cleared(released, coefficients, novelty, before[large], inside[large], representatives, exposure.p):
        return True
    sizes[cut.split] = -1
    sizes[cut.whole] = -1
    sizes[in_basis] = -1
    others = largest(sizes, WITNESS_RANKED)
    others = others[sizes[others] > 0]
    others = others[~small_of(others)]
    outside = np.zeros(others.size, dtype=bool)
    return cleared(released, coefficients, novelty, others, outside, representatives, exposure.p)


def cleared(
    released: ReleasedSets,
    coefficients: csr_matrix,
    novelty: Residues,
    before: Ids,
    inside: npt.NDArray[np.bool_],
    representatives: Callable[[Ids], RowIds],
    p: int,
) -> bool:
    """Whether every row with a nonzero ``novelty`` is the only nonzero row at one of
    the candidate columns (large atoms after the query, read in their order, ``_BATCH``
    at a time, at most ``_MOST_WITNESSED``): then the check's peeling drops each of
    them, and it ends CLEAR.

    A candidate is given by the atom it is part of before the query (``before``: the
    rows' values on the earlier sets are that atom's, from ``coefficients``, positions x
    earlier sets) and whether it is inside the query (``inside``: the rows gain
    ``novelty`` there); ``representatives(atoms)`` gives one row of each atom."""
    waiting = np.flatnonzero(novelty)
    for start in range(0, min(before.size, _MOST_WITNESSED), _BATCH):
        atoms, where = np.unique(before[start : start + _BATCH], return_inverse=True)
        values = values_at(released, coefficients, representatives(atoms), p)[:, where]
        values = (values + novelty[:, None] * inside[start : start + _BATCH][None, :]) % p
        nonzero = values != 0
        alone = nonzero & (nonzero.sum(axis=0) == 1)[None, :]
        waiting = waiting[~alone[waiting].any(axis=1)]
        if not waiting.size:
            return True
    return False


def first_exchange(
    released: ReleasedSets,
    line: tuple[Ids, Residues],
    ranked: Ids,
    candidates: Callable[[Ids], Ids],
    representatives: Callable[[Ids], RowIds],
    p: int,
) -> int | None:
    """The first of ``ranked`` (atoms by decreasing size, then id) that ``candidates``
    keeps (large, not in the basis) where the row with the coefficients ``line`` (sets,
    residues) is nonzero; -1 when there is none; None when ``_MOST_TRIED`` atoms were
    read without an answer (the caller reads the whole row)."""
    index, value = line
    entries = (np.zeros(index.size, dtype=np.int64), index, value)
    tried, start, batch = 0, 0, _BATCH
    while start < ranked.size:
        if tried >= _MOST_TRIED:
            return None
        atoms = candidates(ranked[start : start + batch])
        start += batch
        if atoms.size:
            values = _values(released, 1, entries, representatives(atoms), p)[0]
            tried += atoms.size
            hit = np.flatnonzero(values)
            if hit.size:
                return int(atoms[hit[0]])
        batch *= 2
    return -1
