"""Invariant: whatever the table, sensitive cells, method and secret, the pattern
passes the LP audit (every sensitive cell's interval reaches its levels)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guard.suppression import (
    Method,
    Protection,
    SuppressionOptions,
    Table,
    Weight,
    audit,
    failures,
    suppress,
)

CubeTable = Callable[[np.ndarray], Table]


@st.composite
def problems(draw: st.DrawFn, max_dims: int) -> tuple[np.ndarray, dict[tuple[int, ...], Protection]]:
    dims = draw(st.integers(min_value=1, max_value=max_dims))
    shape = tuple(
        draw(st.lists(st.integers(min_value=2, max_value=4 if dims < 3 else 3), min_size=dims, max_size=dims))
    )
    size = int(np.prod(shape))
    flat = draw(st.lists(st.integers(min_value=0, max_value=40), min_size=size, max_size=size))
    values = np.array(flat, dtype=float).reshape(shape)
    positive = [tuple(int(i) for i in index) for index in zip(*np.nonzero(values), strict=True)]
    if not positive:
        values.flat[0] = 1.0
        positive = [tuple(0 for _ in shape)]
    chosen = draw(st.lists(st.sampled_from(positive), min_size=1, max_size=3, unique=True))
    fraction = st.sampled_from([0.1, 0.3, 0.5, 1.0])
    sensitive = {
        key: Protection(draw(fraction) * values[key], draw(fraction) * values[key]) for key in chosen
    }
    return values, sensitive


settings_ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings_
@given(
    problems(max_dims=3), st.sampled_from(list(Method)), st.sampled_from(list(Weight)), st.integers(0, 2**32)
)
def test_suppression_always_passes_the_audit(
    cube_table: CubeTable,
    problem: tuple[np.ndarray, dict[tuple[int, ...], Protection]],
    method: Method,
    weight: Weight,
    seed: int,
) -> None:
    values, sensitive = problem
    table = cube_table(values)
    result = suppress(table, sensitive, options=SuppressionOptions(method=method, weight=weight), seed=seed)
    assert result.primary == frozenset(sensitive)
    assert failures(table, result.suppressed, sensitive) == []
    # and the audit intervals always contain the truth
    for key, (low, high) in audit(table, result.suppressed).items():
        assert low - 1e-6 <= table.value(key) <= high + 1e-6


@settings_
@given(problems(max_dims=2), st.integers(0, 2**32))
def test_grand_total_is_never_the_only_complement_needed(
    cube_table: CubeTable, problem: tuple[np.ndarray, dict[tuple[int, ...], Protection]], seed: int
) -> None:
    """A sensitive cell never stands alone: at least one more cell shares each of its
    relations among the withheld ones (else it would be recomputed from that relation)."""
    values, sensitive = problem
    table = cube_table(values)
    hidden = suppress(table, sensitive, seed=seed).suppressed
    for relation in table.relations:
        cells = {relation.total, *relation.members}
        withheld = cells & hidden
        assert len(withheld) != 1 or not withheld & set(sensitive)
