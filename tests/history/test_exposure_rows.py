"""``Exposure.rows_of`` gives an atom's rows after a tentative query exactly as
``tentative_atom`` (a plain set difference) does, in the same order, whichever way it
takes the outside part of a cut atom (sorting, a table over the inside's range, a mask)."""

from __future__ import annotations

import numpy as np
import pytest

from guard.history.exposure import tentative_atom
from guard.history.span import SpanAuditor


@pytest.mark.parametrize("seed", range(4))
def test_rows_after_a_query_are_the_set_difference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 20_000
    auditor = SpanAuditor(np.arange(n))
    # atoms of every size: blocks of 50 to 5,000 rows, and scattered sets
    for size in (5_000, 3_000, 900, 300, 50):
        start = int(rng.integers(0, n - size))
        auditor.release(np.arange(start, start + size))
    auditor.release(np.sort(rng.choice(n, size=2_000, replace=False)))
    sizes = {"sort": 0, "table": 0, "mask": 0}
    for _ in range(6):
        query = np.sort(rng.choice(n, size=int(rng.integers(500, 12_000)), replace=False))
        exposure = auditor.exposure(query)
        if exposure is None:
            continue
        cut = exposure.step.cut
        for atom in [*cut.split.tolist(), *cut.children.tolist()]:
            expected = tentative_atom(auditor.partition, cut, atom)
            assert np.array_equal(exposure.rows_of(atom), expected)
            if atom in cut.split.tolist():
                whole = auditor.partition.rows(atom).size
                kind = "sort" if whole < 256 else "table" if whole * 16 < n else "mask"
                sizes[kind] += 1
    assert all(count > 0 for count in sizes.values()), sizes
