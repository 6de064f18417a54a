"""Atoms: the partition refinement against a brute-force signature grouping."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from guard.history import AtomPartition, as_row_ids


def brute_atoms(n: int, queries: list[list[int]]) -> dict[frozenset[int], None]:
    groups: dict[tuple[bool, ...], set[int]] = {}
    for row in range(n):
        groups.setdefault(tuple(row in set(q) for q in queries), set()).add(row)
    return {frozenset(g): None for g in groups.values()}


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 30).flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(0, n - 1), min_size=n, max_size=n),
            st.lists(st.lists(st.integers(0, n - 1), max_size=n), max_size=10),
        )
    )
)
def test_refinement_matches_signature_groups(case: tuple[list[int], list[list[int]]]) -> None:
    units, queries = case
    n = len(units)
    partition = AtomPartition(units)
    for i, query in enumerate(queries):
        partition.refine(np.array(query, dtype=np.int64))
        ours = {}
        for atom in range(partition.atom_count):
            rows = partition.rows(atom)
            assert rows.size == partition.size(atom) > 0
            assert partition.units(atom) == len({units[r] for r in rows})
            assert (partition.atom_of(rows) == atom).all()
            assert partition.representative(atom) in rows
            ours[frozenset(rows.tolist())] = None
        assert ours.keys() == brute_atoms(n, queries[: i + 1]).keys()
    assert int(partition.sizes().sum()) == n


def test_plan_changes_nothing_and_apply_rejects_stale_plans() -> None:
    partition = AtomPartition.one_unit_per_row(6)
    plan = partition.plan(np.array([1, 3]))
    assert partition.atom_count == 1 and plan.cuts_anything
    assert plan.split.tolist() == [0] and plan.children.tolist() == [1]
    assert plan.inside(0).tolist() == [1, 3]
    assert (plan.inside_units.tolist(), plan.outside_units.tolist()) == ([2], [4])
    other = partition.plan(np.array([0]))
    partition.apply(plan)
    assert sorted(partition.rows(1).tolist()) == [1, 3]  # the inside part gets the new id
    assert sorted(partition.rows(0).tolist()) == [0, 2, 4, 5]  # the outside part keeps the id
    with pytest.raises(ValueError, match="stale refinement"):
        partition.apply(other)


def test_group_sums_add_per_inside_part() -> None:
    partition = AtomPartition.one_unit_per_row(6)
    partition.refine(np.array([0, 1, 2]))
    plan = partition.plan(np.array([1, 2, 4]))
    weights = np.array([[1, 2, 3, 4, 5, 6], [10, 20, 30, 40, 50, 60]], dtype=np.uint32)  # copies x rows
    by_parent = dict(zip(plan.split.tolist(), plan.group_sums(weights).tolist(), strict=True))
    assert by_parent == {1: [5, 50], 0: [5, 50]}


def test_units_spanning_several_rows() -> None:
    # rows 0-2 belong to one respondent; cutting row 0 off leaves that unit on both sides
    partition = AtomPartition(["a", "a", "a", "b", "c"])
    assert partition.unit_count == 3 and partition.units(0) == 3
    partition.refine(np.array([0, 3]))
    assert sorted((partition.size(a), partition.units(a)) for a in range(2)) == [(2, 2), (3, 2)]
    partition.refine(np.array([1, 2]))  # the outside part {4} loses the respondent entirely
    assert sorted((partition.size(a), partition.units(a)) for a in range(3)) == [(1, 1), (2, 1), (2, 2)]


def test_query_sets_are_normalized_and_checked() -> None:
    assert as_row_ids(np.array([5, 1, 5, 3])).tolist() == [1, 3, 5]
    assert as_row_ids(BitMap([7, 2])).tolist() == [2, 7]
    assert as_row_ids(np.array([], dtype=np.int64)).tolist() == []
    partition = AtomPartition.one_unit_per_row(4)
    with pytest.raises(ValueError, match=r"row id 4 outside 0\.\.3"):
        partition.plan(np.array([0, 4]))
    with pytest.raises(ValueError, match="row id -1 outside"):
        partition.plan(np.array([-1, 2]))
    with pytest.raises(ValueError, match="1-d integer array"):
        partition.plan(np.array([0.5]))
    with pytest.raises(IndexError, match="atom 3 does not exist"):
        partition.rows(3)
    with pytest.raises(ValueError, match="non-empty 1-d array"):
        AtomPartition([])


def test_memory_is_linear_in_rows_and_atoms() -> None:
    partition = AtomPartition.one_unit_per_row(10_000)
    rng = np.random.default_rng(3)
    for _ in range(50):
        partition.refine(np.flatnonzero(rng.random(10_000) < 0.5))
    assert partition.atom_count > 9_000
    # 6 int64 arrays per row (+1 scratch byte), 3 per atom with doubling capacity: no query term
    rows, atoms = partition.row_count, partition.atom_count
    assert partition.nbytes() <= 8 * (6 * rows + 8 + 3 * 2 * atoms) + rows
