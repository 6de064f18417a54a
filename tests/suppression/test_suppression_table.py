"""Relations derived from cell keys, bounds, and linked tables."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from guard.suppression import TOTAL, Relation, Table, derive_relations, union


def relations(table: Table) -> set[tuple[object, frozenset[object]]]:
    return {(r.total, frozenset(r.members)) for r in table.relations}


def test_one_dimension() -> None:
    table = Table.from_cells({("a",): 1, ("b",): 2, (TOTAL,): 3})
    assert relations(table) == {((TOTAL,), frozenset({("a",), ("b",)}))}


def test_two_dimensions_with_marginals(castro: Table) -> None:
    table = castro
    # 3 rows + 5 columns + the grand total twice (over rows and over columns)
    assert len(table.relations) == 10
    assert ((TOTAL, "P3"), frozenset({("M1", "P3"), ("M2", "P3"), ("M3", "P3")})) in relations(table)
    assert ((TOTAL, TOTAL), frozenset({("M1", TOTAL), ("M2", TOTAL), ("M3", TOTAL)})) in relations(table)
    assert ((TOTAL, TOTAL), frozenset({(TOTAL, f"P{j}") for j in range(1, 6)})) in relations(table)


def test_three_dimensions_with_all_marginals(cube_table: Callable[[np.ndarray], Table]) -> None:
    table = cube_table(np.arange(24, dtype=float).reshape(2, 3, 4))
    assert len(table) == 3 * 4 * 5
    # one relation per (total cell, TOTAL position): Σ over cells of the number of TOTALs
    expected = sum(sum(k is TOTAL for k in key) for key in table.keys)
    assert len(table.relations) == expected
    a = table.matrix @ np.array(table.values)
    assert np.allclose(a, 0)


def test_rollup_hierarchy() -> None:
    # GROUP BY ROLLUP(year, month): no (TOTAL, month) cells, so no relation over years
    cells = {
        (2023, 1): 5,
        (2023, 2): 7,
        (2024, 1): 1,
        (2023, TOTAL): 12,
        (2024, TOTAL): 1,
        (TOTAL, TOTAL): 13,
    }
    assert relations(Table.from_cells(cells)) == {
        ((2023, TOTAL), frozenset({(2023, 1), (2023, 2)})),
        ((2024, TOTAL), frozenset({(2024, 1)})),
        ((TOTAL, TOTAL), frozenset({(2023, TOTAL), (2024, TOTAL)})),
    }


def test_absent_cells_are_empty_groups() -> None:
    # GROUP BY emits no empty group: (M2, P3) absent means 0, and the row still adds up
    cells = {("a", "x"): 1, ("a", "y"): 2, ("b", "x"): 3, ("a", TOTAL): 3, ("b", TOTAL): 3}
    assert ((("b", TOTAL)), frozenset({("b", "x")})) in relations(Table.from_cells(cells))


def test_relation_that_does_not_add_up_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"\('a', TOTAL\) is not the sum of its members"):
        Table.from_cells({("a", "x"): 1, ("a", "y"): 2, ("a", TOTAL): 4})


def test_default_and_given_bounds() -> None:
    table = Table.from_cells({("a",): 1, ("b",): -2, (TOTAL,): -1}, lower={("b",): -10, (TOTAL,): -10})
    assert table.lower == (0.0, -10.0, -10.0)
    assert table.upper == (math.inf,) * 3
    with pytest.raises(ValueError, match="outside its bounds"):
        Table.from_cells({("a",): -1})


def test_keys_must_be_tuples() -> None:
    with pytest.raises(ValueError, match="must be tuples"):
        derive_relations(["a"])  # type: ignore[list-item]


def test_explicit_relations() -> None:
    table = Table.from_cells(
        {("x",): 3, ("y",): 4, ("z",): 7}, relations=[Relation(("z",), (("x",), ("y",)))]
    )
    assert relations(table) == {(("z",), frozenset({("x",), ("y",)}))}
    with pytest.raises(ValueError, match="unknown cell"):
        table.with_relations([Relation(("w",), (("x",),))])


def test_union_shares_cells_with_the_same_key() -> None:
    left = Table.from_cells({("a", "x", TOTAL): 1, ("a", "y", TOTAL): 2, ("a", TOTAL, TOTAL): 3})
    right = Table.from_cells({("a", TOTAL, "u"): 1.5, ("a", TOTAL, "v"): 1.5, ("a", TOTAL, TOTAL): 3})
    joint = union(left, right)
    assert len(joint) == 5
    assert len(joint.relations) == 2  # the shared total equals both breakdowns
    with pytest.raises(ValueError, match="different values"):
        union(left, Table.from_cells({("a", TOTAL, TOTAL): 4}))


def test_union_derives_relations_only_the_union_has() -> None:
    members = Table.from_cells({("a", "x"): 1, ("a", "y"): 2})
    total = Table.from_cells({("a", TOTAL): 3})
    assert relations(union(members, total)) == {(("a", TOTAL), frozenset({("a", "x"), ("a", "y")}))}
    assert union(members, total, derive=False).relations == ()


def test_unknown_cells_are_named(castro: Table) -> None:
    with pytest.raises(ValueError, match=r"\('M9', 'P1'\) is not a cell of this table"):
        castro.value(("M9", "P1"))
