"""The finest-cell query sets of a selection are computed once per table version, shared
read-only, and keyed by typed constants."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from guard import Guard
from guard.history.boxes import BoxIndex
from guard.history.finest import FinestCells
from guard.query.front import read_query

SPACES = [("count", None, frozenset({0}))]


@pytest.fixture
def finest(students: Guard) -> FinestCells:
    table = students.policy.table("students")
    assert table is not None
    return FinestCells(students.backend, table, students.backend.table_info("students"))


def _shape(guard: Guard, sql: str, parameters: list[object] | None = None):  # type: ignore[no-untyped-def]
    return read_query(sql, guard.policy, guard.policy.analyst("alice"), guard.column_types, parameters).shape


def test_the_sets_of_one_selection_are_shared_and_read_only(students: Guard, finest: FinestCells) -> None:
    shape = _shape(students, "SELECT major, COUNT(*) FROM students GROUP BY major")
    sets = finest.query_sets(shape, SPACES)
    assert (
        finest.query_sets(_shape(students, "SELECT major, COUNT(*) FROM students GROUP BY 1"), SPACES) is sets
    )
    ids = next(iter(sets[0].cells.values()))
    with pytest.raises(ValueError, match="read-only"):
        ids[0] = 0
    with pytest.raises(TypeError):
        sets[0].cells[("x",), ("y",)] = ids  # type: ignore[index]


def test_other_selections_and_typed_constants_get_their_own_sets(
    students: Guard, finest: FinestCells
) -> None:
    whole_shape = _shape(students, "SELECT COUNT(*) FROM students WHERE class = 1980")
    (predicate,) = whole_shape.predicates  # analysis makes constants ints; a float one by hand
    fraction_shape = dataclasses.replace(
        whole_shape, predicates=(dataclasses.replace(predicate, values=(1980.0,)),)
    )
    whole = finest.query_sets(whole_shape, SPACES)
    assert finest.query_sets(fraction_shape, SPACES) is not whole
    other = finest.query_sets(_shape(students, "SELECT COUNT(*) FROM students WHERE class = 1978"), SPACES)
    assert not np.array_equal(next(iter(other[0].cells.values())), next(iter(whole[0].cells.values())))


def test_disjoint_units_add_up_over_disjoint_cells(finest: FinestCells) -> None:
    """One row per student: no unit spans two finest cells, so the group search may count
    a part of an atom as the atom less its other part (``SmallAtoms.subtract``)."""
    assert finest.disjoint
    rng = np.random.default_rng(5)
    for _ in range(20):
        ids = rng.permutation(finest.count)
        cut = int(rng.integers(0, finest.count + 1))
        a, b = np.sort(ids[:cut]), np.sort(ids[cut:])
        assert finest.units(a) + finest.units(b) == finest.units(ids)
        assert not finest.unit_ids(a) & finest.unit_ids(b)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT major, sex, COUNT(*) FROM students GROUP BY major, sex",
        "SELECT class, COUNT(*) FROM students WHERE major IN ('EE', 'CS') AND sex <> 'F' GROUP BY class",
        "SELECT COUNT(*) FROM students WHERE class BETWEEN 1978 AND 1980",
        "SELECT sex, COUNT(*) FROM students WHERE major = 'EE' GROUP BY ROLLUP (sex)",
    ],
)
def test_the_cells_of_conjunctive_queries_are_boxes(students: Guard, finest: FinestCells, sql: str) -> None:
    """Every cell of an accepted query is a box over the finest cells (``boxes.py``), on the
    count and on a measure's non-NULL rows: the released sets' index keeps them as boxes."""
    codes = finest.box_codes
    assert codes is not None and codes.rows == finest.count
    spaces = [*SPACES, ("income", "income", frozenset({1}))]
    for space in finest.query_sets(_shape(students, sql), spaces):
        index = BoxIndex(codes)
        for owner, ids in enumerate(space.cells.values()):
            assert ids.size == 0 or index.add(ids, owner), (space.space, ids)
