"""The deviation LP's input built without scipy's fancy indexing is the same, array for
array, as scipy builds it: the LP HiGHS solves (and so every deviation and every cell
withheld) does not change. On the real attacker view of ``test_deviation_scale.py``."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from guard.suppression.deviation import DeviationProblem
from guard.suppression.entries import column_product, entries, paired_arrays, submatrix
from guard.suppression.table import TOTAL, Table


@pytest.fixture(scope="module")
def table(scale_table: Table) -> Table:
    return scale_table


@pytest.mark.parametrize("seed", range(5))
def test_the_restricted_matrix_is_scipys_array_for_array(table: Table, seed: int) -> None:
    rng = np.random.default_rng(seed)
    csc = table.csc
    n = csc.shape[1]
    for size in (1, 7, 60, 400, n):
        columns = np.sort(rng.choice(n, size=min(size, n), replace=False))
        sub = csc[:, columns]
        rows = np.unique(sub.indices)
        expected = sub[rows]
        part, found = submatrix(csc, columns)
        assert (found == rows).all()
        assert part.shape == expected.shape
        for name in ("indptr", "indices", "data"):
            assert np.array_equal(getattr(part, name), getattr(expected, name)), name
        # as the LP receives it: [part, -part] stacked by columns
        stacked = paired_arrays(part.indptr, part.indices, part.data)
        reference = sparse.hstack([expected, -expected], format="csc")
        for name, array in zip(("indptr", "indices", "data"), stacked, strict=True):
            assert np.array_equal(array, getattr(reference, name)), name


def test_the_entries_of_lines_are_scipys(table: Table) -> None:
    rng = np.random.default_rng(3)
    for matrix in (table.matrix, table.csc):
        lines_total = matrix.shape[0] if isinstance(matrix, sparse.csr_matrix) else matrix.shape[1]
        for size in (0, 1, 5, 50):
            lines = rng.choice(lines_total, size=size, replace=False)
            expected = (
                matrix[lines].indices if isinstance(matrix, sparse.csr_matrix) else matrix[:, lines].indices
            )
            assert np.array_equal(entries(matrix, lines), expected)


@pytest.mark.parametrize("distant", [True, False])
def test_the_box_with_the_callers_array_is_the_box_from_the_set(table: Table, distant: bool) -> None:
    problem = DeviationProblem.of(table, set())
    rng = np.random.default_rng(11)
    costs = rng.random(len(table))
    hidden = {int(i) for i in rng.choice(len(table), size=40, replace=False)}
    ids = np.array(sorted(hidden))
    for p in rng.choice(len(table), size=20, replace=False).tolist():
        assert np.array_equal(
            problem.start(p, costs, hidden, distant), problem.start(p, costs, hidden, distant, ids)
        )


@pytest.mark.parametrize("seed", range(4))
def test_a_certificates_residual_is_scipys_bit_for_bit(table: Table, seed: int) -> None:
    """``Certificates.add`` checks ``A d = 0`` up to round-off: the residual, summed in
    scipy's order, is the same floating-point vector, so the same deviations are kept."""
    rng = np.random.default_rng(seed)
    csc = table.csc
    n = csc.shape[1]
    for size in (1, 9, 120, n):
        support = np.sort(rng.choice(n, size=min(size, n), replace=False))
        values = rng.normal(scale=10.0 ** rng.integers(-3, 9), size=support.size)
        expected = csc[:, support] @ values
        assert np.array_equal(column_product(csc, support, values), expected)


def _reference_start(
    problem: DeviationProblem, p: int, costs: np.ndarray, hidden: set[int], distant: bool
) -> np.ndarray:
    """The box as it was built before it used masks and line arrays (lists sorted by
    Python, sets joined by np.union1d / np.unique): the oracle of ``start``."""
    import itertools

    rows = problem.csc.indices[problem.csc.indptr[p] : problem.csc.indptr[p + 1]]
    seen, stack = {p}, [p]
    while stack:
        for parent in problem.parents.get(stack.pop(), ()):
            if parent not in seen:
                seen.add(parent)
                stack.append(parent)
    key = problem.cell_keys[p]
    width = max(1, round(256 ** (1 / max(1, len(key)))) - 2)
    choices = []
    for j in range(len(key)):
        line = [i for i in problem.lines[((*key[:j], None, *key[j + 1 :]), j)] if i != p]
        line.sort(key=lambda i: costs[i])
        choices.append({key[j], TOTAL, *(problem.cell_keys[i][j] for i in line[:width])})
    seen.update(i for i in (problem.keys.get(k) for k in itertools.product(*choices)) if i is not None)
    start = np.union1d(entries(problem.csr, rows), np.fromiter(seen, dtype=int))
    if not hidden:
        return start
    ids = np.fromiter(hidden, dtype=int, count=len(hidden))
    if distant:
        return np.union1d(start, ids)
    near = np.unique(entries(problem.csr, np.unique(entries(problem.csc, start))))
    mask = np.zeros(len(problem.up_room), dtype=bool)
    mask[ids] = True
    return np.union1d(start, near[mask[near]])


@pytest.mark.parametrize("distant", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_the_box_is_the_one_built_with_sorted_lists_and_union1d(
    table: Table, distant: bool, seed: int
) -> None:
    problem = DeviationProblem.of(table, set())
    rng = np.random.default_rng(seed)
    # few distinct costs: ties, which the stable sort must break as list.sort did
    costs = rng.integers(0, 4, size=len(table)).astype(float)
    for size in (0, 5, 60, len(table) // 3):
        hidden = {int(i) for i in rng.choice(len(table), size=size, replace=False)}
        for p in rng.choice(len(table), size=15, replace=False).tolist():
            got = problem.start(p, costs, hidden, distant)
            expected = _reference_start(problem, p, costs, hidden, distant)
            assert np.array_equal(got, expected), (p, size)
