"""Sparse vectors modulo p: the rows of the span audit's M^-1.

M^-1 of the released 0/1 query rows is sparse in practice (measured: u = M^-1 a_c and
v = q_B M^-1 have ~0.2 % nonzeros at rank 5,000 on bench_audit's workload), so a dense
r x r array wastes O(r^2) memory (518 MB at rank 10,276) and every rank-one update
touches it all. Here each row is a pair of arrays: sorted indices and nonzero residues.
The audit reads rows (v = q_B M^-1 sums rows) and products with 0/1 columns
(u = M^-1 a): those go through a CSR snapshot of all rows, rebuilt only when the rows
changed since cost more to read one by one than a rebuild (amortized, ski rental).
A rank-one update U V^T changes the rows in supp(U) only, so its cost follows what it
touches, not r.

Why not a sparse echelon form of the released rows over atoms: its rows are the exact
rows M^-1 A, whose supports grow with the atoms every query splits (r x atoms, 9 GB
dense at 1M rows and 2,000 queries); M^-1 has r columns whatever the atoms, and the
exact rows a decision needs are computed from it sparsely (``exposure.py``).

The arithmetic is exact mod p: two residues < 2**50 add without overflow, products go
through ``mul_mod``, and sums of many residues are taken in 25-bit halves, each exact in
float64 up to 2**28 terms. Nothing is approximate, so decisions are those of the dense
inverse, entry for entry.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.sparse import csr_matrix

from guard.history.csrpick import pick_rows
from guard.history.modular import HALF, LOW, ONE_PRODUCT, add_outer_mod, mul_mod, sum_mod

__all__ = ["DenseLines", "SparseLines", "accumulate"]

Ids = npt.NDArray[np.int64]
Residues = npt.NDArray[np.int64]

# numpy's per-array overhead, counted in nbytes so that the memory figure is honest
_ARRAY_OVERHEAD = 112

#: entries of the dense scratch block a rank-one update may use (32 MB); wider ones sort
_DENSE_BLOCK = 1 << 22

_EMPTY_IDS: Ids = np.zeros(0, dtype=np.int64)

#: lines from which ``triplets`` reads the unchanged ones from the snapshot
_FROM_SNAPSHOT = 64


def accumulate(index: Ids, value: Residues, size: int, p: int) -> Residues:
    """Dense vector of length ``size``: the sum mod p of ``value`` at each ``index``
    (repeats add up; fewer than 2**28 terms per index keep each half exact in float64)."""
    if not index.size:
        return np.zeros(size, dtype=np.int64)
    high = np.bincount(index, weights=(value >> HALF).astype(np.float64), minlength=size)
    low = np.bincount(index, weights=(value & LOW).astype(np.float64), minlength=size)
    high_mod = np.rint(high).astype(np.int64) % p
    low_mod = np.rint(low).astype(np.int64) % p
    total = mul_mod(high_mod, (1 << HALF) % p, p) + low_mod
    return np.where(total >= p, total - p, total)


class SparseLines:
    """Lines 0 .. n - 1 (the rows, or the columns, of a sparse matrix mod p)."""

    def __init__(self, p: int) -> None:
        self.p = p
        # a line's indices are below its count of columns (the rank), kept in 32 bits:
        # 12 bytes an entry instead of 16 (read back as int64)
        self._index: list[npt.NDArray[np.int32]] = []
        self._value: list[Residues] = []
        self._nnz = 0
        # every line as one CSR matrix of residues (for products), and the lines changed
        # since it was built (read from their own arrays until the next rebuild)
        self._snapshot: csr_matrix | None = None
        self._dirty: set[int] = set()
        self._spent = 0  # entries of changed lines read directly since the last rebuild

    def __len__(self) -> int:
        return len(self._index)

    @property
    def nnz(self) -> int:
        return self._nnz

    def append(self, index: Ids | None = None, value: Residues | None = None) -> None:
        """A new last line (empty by default)."""
        index = _EMPTY_IDS if index is None else np.asarray(index, dtype=np.int64)
        value = _EMPTY_IDS if value is None else np.asarray(value, dtype=np.int64)
        self._dirty.add(len(self._index))
        self._index.append(_narrow(index))
        self._value.append(value)
        self._nnz += int(index.size)

    def line(self, i: int) -> tuple[Ids, Residues]:
        return self._index[i].astype(np.int64), self._value[i]

    def dense(self, i: int, size: int) -> Residues:
        out = np.zeros(size, dtype=np.int64)
        out[self._index[i]] = self._value[i]
        return out

    def add_outer(self, lines: Ids, factors: Residues, index: Ids, value: Residues) -> None:
        """line_i += factors[i] * (index, value) mod p for each i of ``lines`` (a rank-one
        update restricted to the lines it changes), in one vectorized merge: the lines'
        entries and the new ones are sorted by (line, index) and equal keys summed."""
        if not lines.size or not index.size:
            return
        p = self.p
        scaled = mul_mod(np.asarray(factors, dtype=np.int64)[:, None], value[None, :], p)
        owner, old_index, old_value = self.triplets(lines)
        count = lines.size
        width = int(max(int(index.max()), int(old_index.max()) if old_index.size else 0)) + 1
        if count * width <= _DENSE_BLOCK:
            # a dense scratch block of the changed lines: scatter, add, read back in order
            block = np.zeros((count, width), dtype=np.int64)
            block[owner, old_index] = old_value
            block[:, index] += scaled
            np.subtract(block, p, out=block, where=block >= p)  # two residues: one step
            line_of, index_of = np.nonzero(block)
            summed = block[line_of, index_of]
        else:
            key = np.concatenate(
                [
                    owner * width + old_index,
                    (np.arange(count, dtype=np.int64)[:, None] * width + index).ravel(),
                ]
            )
            values = np.concatenate([old_value, scaled.ravel()])
            order = np.argsort(key, kind="stable")
            key, values = key[order], values[order]
            starts = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
            summed = np.add.reduceat(values, starts) % p  # at most two residues per key
            keep = summed != 0
            summed = summed[keep]
            line_of, index_of = np.divmod(key[starts][keep], width)
        bounds = np.searchsorted(line_of, np.arange(count + 1, dtype=np.int64))
        self._nnz += int(summed.size) - int(old_index.size)
        self._dirty.update(lines.tolist())
        for t, i in enumerate(lines.tolist()):
            # copies, so that no line keeps this call's whole arrays alive
            self._index[i] = _narrow(index_of[bounds[t] : bounds[t + 1]])
            self._value[i] = summed[bounds[t] : bounds[t + 1]].copy()

    def gather(self, lines: Ids, size: int) -> Residues:
        """Dense sum mod p of ``lines`` (length ``size``)."""
        if not lines.size:
            return np.zeros(size, dtype=np.int64)
        picked = lines.tolist()
        index = np.concatenate([self._index[i] for i in picked])
        value = np.concatenate([self._value[i] for i in picked])
        return accumulate(index, value, size, self.p)

    def product(self, columns: Ids, size: int) -> Residues:
        """M x mod p (dense, one entry per line) for the 0/1 vector x that is 1 on
        ``columns`` (indices below ``size``): the snapshot's product, then the lines
        changed since it was built, read directly. The snapshot is rebuilt (O(nnz)) once
        the entries read directly since the last rebuild exceed twice the nonzeros, so a
        rebuild costs at most what it saves (ski rental)."""
        count = len(self._index)
        if self._snapshot is None or self._spent > 2 * self._nnz:
            self._rebuild(size)
        assert self._snapshot is not None
        snapshot = self._snapshot
        out = np.zeros(count, dtype=np.int64)
        x = np.zeros(snapshot.shape[1], dtype=np.int64)
        x[columns[columns < x.size]] = 1
        if snapshot.shape[1] <= ONE_PRODUCT:
            # a line has at most one entry per column: at most ONE_PRODUCT residues < 2**50
            # add up to less than 2**63, so one int64 product is exact
            sums = snapshot @ x % self.p
        else:
            pattern = (snapshot.indices, snapshot.indptr)
            high = csr_matrix((snapshot.data >> HALF, *pattern), shape=snapshot.shape)
            low = csr_matrix((snapshot.data & LOW, *pattern), shape=snapshot.shape)
            sums = (mul_mod((high @ x) % self.p, (1 << HALF) % self.p, self.p) + (low @ x) % self.p) % self.p
        out[: snapshot.shape[0]] = sums
        if self._dirty:
            dirty = np.fromiter(self._dirty, dtype=np.int64, count=len(self._dirty))
            member = np.zeros(size, dtype=bool)
            member[columns] = True
            owner, index, value = self.triplets(dirty)
            self._spent += int(index.size) + dirty.size
            hit = member[index]
            out[dirty] = accumulate(owner[hit], value[hit], dirty.size, self.p)
        return out

    def _rebuild(self, size: int) -> None:
        owner, index, value = self.triplets(np.arange(len(self._index), dtype=np.int64))
        self._snapshot = csr_matrix((value, (owner, index)), shape=(len(self._index), size), dtype=np.int64)
        self._dirty = set()
        self._spent = 0

    def triplets(self, lines: Ids) -> tuple[Ids, Ids, Residues]:
        """(position in ``lines``, index, value) of every entry of ``lines``, concatenated."""
        snapshot = self._snapshot
        if snapshot is not None and lines.size >= _FROM_SNAPSHOT:
            # the lines unchanged since the snapshot, sliced from it in C: a loop over
            # thousands of small arrays took 1.5 s of q12's first answer at 100,000 rows
            clean = lines < snapshot.shape[0]
            if self._dirty:
                changed = np.fromiter(self._dirty, dtype=np.int64, count=len(self._dirty))
                clean &= ~np.isin(lines, changed)
            if clean.any():
                return self._through_snapshot(lines, clean, snapshot)
        return self._from_lines(lines)

    def _through_snapshot(
        self, lines: Ids, clean: npt.NDArray[np.bool_], snapshot: csr_matrix
    ) -> tuple[Ids, Ids, Residues]:
        """``triplets``, the clean lines read from the snapshot: the same entries in the
        same order (a line's entries by index, the lines in the caller's order)."""
        at = np.flatnonzero(clean)
        block = pick_rows(snapshot, lines[at])
        owner = np.repeat(at.astype(np.int64), np.diff(block.indptr))
        index, value = block.indices.astype(np.int64), np.asarray(block.data, dtype=np.int64)
        rest = np.flatnonzero(~clean)
        if rest.size:
            more_owner, more_index, more_value = self._from_lines(lines[rest])
            owner = np.concatenate([owner, rest[more_owner]])
            index, value = np.concatenate([index, more_index]), np.concatenate([value, more_value])
            order = np.argsort(owner, kind="stable")
            owner, index, value = owner[order], index[order], value[order]
        return owner, index, value

    def _from_lines(self, lines: Ids) -> tuple[Ids, Ids, Residues]:
        picked = lines.tolist()
        if not picked:
            return _EMPTY_IDS, _EMPTY_IDS, _EMPTY_IDS
        sizes = np.fromiter((self._index[i].size for i in picked), dtype=np.int64, count=len(picked))
        owner = np.repeat(np.arange(len(picked), dtype=np.int64), sizes)
        index = np.concatenate([self._index[i] for i in picked]).astype(np.int64)
        value = np.concatenate([self._value[i] for i in picked])
        return owner, index, value

    def nbytes(self) -> int:
        """Entries (12 bytes each: index and residue), the arrays' own overhead, and the
        snapshot (12 bytes an entry it holds)."""
        lines = 12 * self._nnz + 2 * _ARRAY_OVERHEAD * len(self._index)
        if self._snapshot is None:
            return lines
        snapshot = self._snapshot
        return lines + int(snapshot.data.nbytes + snapshot.indices.nbytes + snapshot.indptr.nbytes)


class DenseLines:
    """The same lines as :class:`SparseLines`, in one dense square array (its side grown
    by a quarter when full). Once M^-1 has filled in past half its entries the dense
    array takes 8 bytes an entry against 24 for the lines and their snapshot (smaller
    even with the headroom) and its blocked rank-one update is faster, so the
    basis switches to it (``basis.InverseBasis``); the values are the same."""

    def __init__(self, p: int, lines: SparseLines) -> None:
        self.p = p
        self._count = len(lines)
        capacity = _grown(self._count)
        self._matrix = np.zeros((capacity, capacity), dtype=np.int64)
        owner, index, value = lines.triplets(np.arange(self._count, dtype=np.int64))
        self._matrix[owner, index] = value

    def __len__(self) -> int:
        return self._count

    @property
    def nnz(self) -> int:
        return int(np.count_nonzero(self._matrix[: self._count, : self._count]))

    def append(self) -> None:
        """A new last line, and column (empty)."""
        if self._count == self._matrix.shape[0]:
            capacity = _grown(self._count)
            grown = np.zeros((capacity, capacity), dtype=np.int64)
            grown[: self._count, : self._count] = self._matrix
            self._matrix = grown
        self._count += 1

    def line(self, i: int) -> tuple[Ids, Residues]:
        index = np.flatnonzero(self._matrix[i, : self._count]).astype(np.int64)
        return index, self._matrix[i, index]

    def dense(self, i: int, size: int) -> Residues:
        return self._matrix[i, :size].copy()

    def add_outer(self, lines: Ids, factors: Residues, index: Ids, value: Residues) -> None:
        if not lines.size or not index.size:
            return
        entries = np.ix_(lines, index)
        part = self._matrix[entries]
        add_outer_mod(part, np.asarray(factors, dtype=np.int64), np.asarray(value, dtype=np.int64), self.p)
        self._matrix[entries] = part

    def gather(self, lines: Ids, size: int) -> Residues:
        return sum_mod(self._matrix[lines, :size], self.p)

    def product(self, columns: Ids, size: int) -> Residues:
        return sum_mod(self._matrix[: self._count, :size][:, columns], self.p, axis=1)

    def triplets(self, lines: Ids) -> tuple[Ids, Ids, Residues]:
        block = self._matrix[lines, : self._count]
        owner, index = np.nonzero(block)
        return owner.astype(np.int64), index.astype(np.int64), block[owner, index]

    def nbytes(self) -> int:
        return int(self._matrix.nbytes)


def _narrow(index: Ids) -> npt.NDArray[np.int32]:
    """A line's indices in 32 bits (a copy: no line keeps a caller's larger array alive)."""
    if index.size and int(index.max()) >= 1 << 31:
        raise OverflowError(f"index {int(index.max())} does not fit a line's 32 bits")
    return index.astype(np.int32)


def _grown(count: int) -> int:
    """The dense array's next side for ``count`` lines: a quarter more, not double (the
    array is r x r: doubling the side would hold four times the entries used; a regrowth
    copies it, once per r / 4 releases)."""
    return max(16, count + count // 4 + 1)
