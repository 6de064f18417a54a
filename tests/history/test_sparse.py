"""The sparse inverse (``sparse.py`` in ``basis.py``) against independent oracles.

On small random histories: the atoms the auditor calls derivable are exactly those an
exact rational elimination (``oracle.RationalSpan``, Fractions) finds in the row span;
the sparse M^-1 times M = A[:, B] is the identity mod p; and the exact rows
(``Exposure.rows_exactly``) equal M'^-1 A' computed by a plain Gauss-Jordan elimination
mod p over Python integers. A deliberately wrong elimination (a merge that drops an
entry) must be caught by the same comparisons.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from guard.history import SpanAuditor, basis, setrows
from guard.history.released import ReleasedSets
from guard.history.setrows import SmallSetRows
from guard.history.sparse import DenseLines, SparseLines, accumulate

from .oracle import RationalSpan

PRIME = 1_000_000_007


def _history(seed: int) -> tuple[int, list[list[int]]]:
    """A random table size and query stream: fresh subsets, intervals, and unions or
    differences of earlier sets (often implied, or cutting nothing)."""
    rng = random.Random(seed)
    n = rng.randint(4, 14)
    queries: list[list[int]] = []
    for _ in range(rng.randint(3, 12)):
        kind = rng.random()
        if kind < 0.4 or len(queries) < 2:
            rows = [r for r in range(n) if rng.random() < 0.5]
        elif kind < 0.7:
            a = rng.randrange(n)
            rows = list(range(a, rng.randint(a + 1, n)))
        else:
            first, second = rng.sample(queries, 2)
            rows = sorted(set(first) ^ set(second) if rng.random() < 0.5 else set(first) | set(second))
        if rows:
            queries.append(rows)
    return n, queries


def _gauss_jordan(matrix: list[list[int]], p: int) -> list[list[int]]:
    """Reduced row echelon form mod p (zero rows dropped), plain Python integers."""
    rows = [list(r) for r in matrix]
    out: list[list[int]] = []
    columns = len(rows[0]) if rows else 0
    for column in range(columns):
        pivot = next((r for r in rows if r[column] % p), None)
        if pivot is None:
            continue
        rows.remove(pivot)
        scale = pow(pivot[column], -1, p)
        pivot = [x * scale % p for x in pivot]
        rows = [[(x - r[column] * y) % p for x, y in zip(r, pivot, strict=True)] for r in rows]
        out = [[(x - r[column] * y) % p for x, y in zip(r, pivot, strict=True)] for r in out]
        out.append(pivot)
    return out


def _mismatches(seed: int) -> int:
    """How often the sparse state disagrees with the oracles along one random history."""
    n, queries = _history(seed)
    auditor = SpanAuditor(np.arange(n), prime=PRIME)
    oracle = RationalSpan(n)
    independent: list[list[int]] = []
    wrong = 0
    for rows in queries:
        query = np.array(rows, dtype=np.int64)
        try:
            exposure = auditor.exposure(query)
        except RuntimeError:  # the auditor's own invariant check noticed a broken state
            return wrong + 1
        if exposure is not None:
            positions = np.arange(exposure.rank, dtype=np.int64)
            exact, _ = exposure.rows_exactly(positions)
            representatives = [int(exposure.rows_of(a)[0]) for a in range(exposure.atom_count)]
            matrix = [[int(rep in set(s)) for rep in representatives] for s in [*independent, rows]]
            basis = exposure.basis_atoms().tolist()
            expected = _gauss_jordan(matrix, PRIME)
            # row j of M'^-1 A' is the one vector of the span that is 1 at basis atom b_j
            # and 0 at the others: compare those values, and the span with the RREF's
            got = exact.toarray()
            if got.shape != (len(expected), len(matrix[0])):
                wrong += 1
            else:
                for j, atom in enumerate(basis):
                    unit = [int(b == atom) for b in basis]
                    wrong += [int(got[j, b]) for b in basis] != unit
                wrong += _span_differs(got.tolist(), expected)
        oracle_added = oracle.add(rows)
        if auditor.release(np.array(rows, dtype=np.int64)) != oracle_added:
            wrong += 1
        if oracle_added:
            independent.append(rows)
        wrong += _inverse_wrong(auditor, independent)
        derivable = {frozenset(auditor.partition.rows(d.atom).tolist()) for d in auditor.determined()}
        wrong += derivable != oracle.derivable_atoms()
    return wrong


def _span_differs(rows: list[list[int]], echelon: list[list[int]]) -> bool:
    """The rows span another space than the reduced echelon form (same count, mod p)."""
    return _gauss_jordan(rows, PRIME) != echelon


def _inverse_wrong(auditor: SpanAuditor, sets: list[list[int]]) -> bool:
    """The sparse M^-1 times M = A[:, B] is not the identity mod p."""
    r = auditor.rank
    if r != len(sets):
        return True
    basis = auditor.basis_atoms()
    representatives = auditor.partition.representatives(basis).tolist()
    m = [[int(rep in set(rows)) for rep in representatives] for rows in sets]
    inverse = [auditor.inverse_row(j).tolist() for j in range(r)]
    product = [[sum(inverse[i][t] * m[t][j] for t in range(r)) % PRIME for j in range(r)] for i in range(r)]
    return product != [[int(i == j) for j in range(r)] for i in range(r)]


SEEDS = range(40)


def test_sparse_state_agrees_with_exact_oracles() -> None:
    assert sum(_mismatches(seed) for seed in SEEDS) == 0


def test_filled_in_inverse_kept_dense_agrees_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """From rank 1, every inverse half full moves to ``DenseLines``: the same checks hold."""
    monkeypatch.setattr(basis, "DENSE_FROM_RANK", 1)
    moved = []
    honest = DenseLines.__init__

    def counted(self, p, lines):  # type: ignore[no-untyped-def]
        moved.append(len(lines))
        honest(self, p, lines)

    monkeypatch.setattr(DenseLines, "__init__", counted)
    assert sum(_mismatches(seed) for seed in SEEDS) == 0
    assert len(moved) > len(SEEDS) // 2  # the dense path was exercised


@pytest.mark.parametrize("keep", [0, 5])
def test_rows_read_from_the_bitmaps_agree_too(monkeypatch: pytest.MonkeyPatch, keep: int) -> None:
    """On these small tables every set's rows are kept (``setrows.py``) and its atoms read
    from them; with none kept (0), or only sets of up to 5 rows (both kinds in one
    product), the others are read from their bitmaps: the same checks hold."""
    monkeypatch.setattr(setrows, "KEEP_UP_TO", keep)
    read = []
    honest = ReleasedSets.membership

    def counted(self, sets, probe):  # type: ignore[no-untyped-def]
        read.append(len(sets))
        return honest(self, sets, probe)

    monkeypatch.setattr(ReleasedSets, "membership", counted)
    assert sum(_mismatches(seed) for seed in SEEDS) == 0
    assert read  # the bitmaps were read


def test_a_wrong_atom_of_a_kept_row_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sabotage: the kept rows' atoms are read one atom off. The comparisons must notice."""
    honest = SmallSetRows.incidence

    def shifted(self, sets, atom_of, representative_of, atoms):  # type: ignore[no-untyped-def]
        def wrong(rows):  # type: ignore[no-untyped-def]
            return (atom_of(rows) + 1) % atoms

        return honest(self, sets, wrong, lambda shifted: representative_of((shifted - 1) % atoms), atoms)

    monkeypatch.setattr(SmallSetRows, "incidence", shifted)
    assert sum(_mismatches(seed) for seed in SEEDS) > 0


def test_a_wrong_elimination_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sabotage: a rank-one update of the sparse inverse forgets its last line (a missed
    fill-in). The comparisons above must notice (otherwise they could not fail)."""
    honest = SparseLines.add_outer

    def forgetful(self, lines, factors, index, value):  # type: ignore[no-untyped-def]
        keep = max(1, lines.size - 1)
        honest(self, lines[:keep], factors[:keep], index, value)

    monkeypatch.setattr(SparseLines, "add_outer", forgetful)
    assert sum(_mismatches(seed) for seed in SEEDS) > 0


def test_accumulate_is_exact_mod_p() -> None:
    p = (1 << 49) + 9  # not prime: accumulate only adds
    rng = np.random.default_rng(3)
    repeated = rng.integers(0, 7, 10_000)
    values = rng.integers(0, p, 10_000)
    sums = [sum(int(v) for v, i in zip(values, repeated, strict=True) if i == j) % p for j in range(8)]
    assert accumulate(repeated, values, 8, p).tolist() == sums


def test_lines_count_their_nonzeros() -> None:
    lines = SparseLines(7)
    lines.append()
    lines.append(np.array([1]), np.array([3]))
    lines.add_outer(np.array([0, 1]), np.array([1, 1]), np.array([1, 2]), np.array([4, 5]))
    assert lines.dense(1, 3).tolist() == [0, 0, 5]  # 3 + 4 = 0 mod 7: dropped
    assert lines.dense(0, 3).tolist() == [0, 4, 5]
    assert lines.nnz == 3


@pytest.mark.parametrize("size", [50, 9_000])
def test_products_are_exact_mod_p(size: int) -> None:
    """``SparseLines.product`` (one int64 product up to 8,191 columns, 25-bit halves
    beyond) against sums of Python integers, with residues near p and lines changed
    after the snapshot."""
    p = (1 << 50) - 27  # prime, residues close to 2**50
    rng = np.random.default_rng(size)
    lines = SparseLines(p)
    oracle: list[dict[int, int]] = []
    for _ in range(12):
        index = np.sort(rng.choice(size, size=min(size, 8_500), replace=False)).astype(np.int64)
        value = p - 1 - rng.integers(0, 1000, index.size)
        lines.append(index, value)
        oracle.append(dict(zip(index.tolist(), value.tolist(), strict=True)))
    for step in range(4):
        columns = np.sort(rng.choice(size, size=int(rng.integers(1, size)), replace=False)).astype(np.int64)
        expected = [sum(line.get(c, 0) for c in columns.tolist()) % p for line in oracle]
        assert lines.product(columns, size).tolist() == expected, step
        # a rank-one update after the snapshot: read from the changed lines directly
        add_at = np.array([step], dtype=np.int64)
        lines.add_outer(add_at, np.array([1]), np.array([0, size - 1]), np.array([p - 2, 5]))
        for c, v in ((0, p - 2), (size - 1, 5)):
            oracle[step][c] = (oracle[step].get(c, 0) + v) % p
    assert lines.nbytes() > 16 * lines.nnz  # the snapshot is counted


def test_a_line_keeps_its_indices_in_32_bits() -> None:
    lines = SparseLines(7)
    lines.append(np.array([2, 5]), np.array([1, 6]))
    index, value = lines.line(0)
    assert index.dtype == np.int64 and index.tolist() == [2, 5] and value.tolist() == [1, 6]
    assert lines.nbytes() < 16 * lines.nnz + 2 * 112 + 1  # 12 bytes an entry, no snapshot yet
    with pytest.raises(OverflowError, match="32 bits"):
        lines.append(np.array([1 << 31]), np.array([1]))


def test_triplets_through_the_snapshot_are_those_of_the_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """``triplets`` reads lines unchanged since the snapshot from it: the same entries in
    the same order as reading every line's arrays, with lines changed and appended after
    the snapshot, repeats and any order of the lines asked."""
    from guard.history import sparse

    p = (1 << 50) - 27
    rng = np.random.default_rng(5)
    lines = SparseLines(p)
    for _ in range(300):
        index = np.sort(rng.choice(400, size=int(rng.integers(0, 30)), replace=False)).astype(np.int64)
        lines.append(index, p - 1 - rng.integers(0, 1000, index.size))
    lines.product(np.array([1, 2], dtype=np.int64), 400)  # builds the snapshot
    used = 0
    for step in range(6):
        changed = rng.choice(300, size=5, replace=False).astype(np.int64)
        lines.add_outer(changed, rng.integers(1, p, 5), np.array([3, 399]), np.array([7, p - 3]))
        lines.append(np.array([step], dtype=np.int64), np.array([step + 1], dtype=np.int64))
        asked = rng.choice(len(lines), size=200).astype(np.int64)  # repeats, any order
        asked[:2] = changed[:2]
        fast = lines.triplets(asked)
        monkeypatch.setattr(sparse, "_FROM_SNAPSHOT", 10**9)
        slow = lines.triplets(asked)
        monkeypatch.undo()
        assert all(np.array_equal(a, b) for a, b in zip(fast, slow, strict=True)), step
        used += lines._snapshot is not None
    assert used == 6  # the snapshot was there to read from
