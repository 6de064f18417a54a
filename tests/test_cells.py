"""The cell reader plans and reads a shape once per data version, and never serves one
shape's cells for another."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest
from sqlglot import exp

from guard import Guard
from guard.backends.base import ResultSet
from guard.cells import CellReader
from guard.query.front import read_query
from guard.query.shape import QueryShape


class _Counting:
    """The guard's engine, counting the queries it runs."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self.capabilities = backend.capabilities
        self.runs = 0

    def execute(self, query: exp.Expr) -> ResultSet:
        self.runs += 1
        result: ResultSet = self._backend.execute(query)
        return result


def _shape(guard: Guard, sql: str, parameters: list[Any] | None = None) -> QueryShape:
    return read_query(sql, guard.policy, guard.policy.analyst("alice"), guard.column_types, parameters).shape


def test_a_shape_is_read_once_per_data_version(students: Guard) -> None:
    engine = _Counting(students.backend)
    reader = CellReader(engine, 2)  # type: ignore[arg-type]
    info = students.backend.table_info("students")
    shape = _shape(students, "SELECT major, SUM(income) FROM students GROUP BY major")
    grid = reader.grid(shape, info)
    assert (
        reader.grid(_shape(students, "select major, sum(income) from students group by major"), info) is grid
    )
    assert engine.runs == 1
    other = reader.grid(shape, dataclasses.replace(info, data_version=info.data_version + "-next"))
    assert engine.runs == 2 and other == grid  # same data here; a new version is read anew


def test_constants_python_finds_equal_are_different_shapes(students: Guard) -> None:
    engine = _Counting(students.backend)
    reader = CellReader(engine, 2)  # type: ignore[arg-type]
    info = students.backend.table_info("students")
    whole = _shape(students, "SELECT COUNT(*) FROM students WHERE class = 1980")
    (predicate,) = whole.predicates  # analysis makes constants ints; a float one by hand
    fraction = dataclasses.replace(whole, predicates=(dataclasses.replace(predicate, values=(1980.0,)),))
    assert whole == fraction and hash(whole) == hash(fraction)  # as dataclasses: 1980 == 1980.0
    reader.grid(whole, info)
    reader.grid(fraction, info)
    assert engine.runs == 2


@pytest.mark.parametrize("limit", [0, 10])
def test_grids_beyond_the_limit_are_not_kept(students: Guard, limit: int) -> None:
    engine = _Counting(students.backend)
    reader = CellReader(engine, 2, limit=limit)  # type: ignore[arg-type]
    info = students.backend.table_info("students")
    shape = _shape(students, "SELECT major, sex, COUNT(*) FROM students GROUP BY major, sex")
    assert reader.grid(shape, info) == reader.grid(shape, info)
    assert engine.runs == 2


class _Waiting(_Counting):
    """An engine whose query waits until ``beside`` has started (at most 10 s)."""

    def __init__(self, backend: Any) -> None:
        super().__init__(backend)
        self.beside = threading.Event()

    def execute(self, query: exp.Expr) -> ResultSet:
        assert self.beside.wait(10), "the other read did not run while the engine read"
        return super().execute(query)


def test_a_first_grid_is_read_while_the_other_read_runs(students: Guard) -> None:
    engine = _Waiting(students.backend)
    reader = CellReader(engine, 2)  # type: ignore[arg-type]
    info = students.backend.table_info("students")
    shape = _shape(students, "SELECT major, SUM(income) FROM students GROUP BY major")
    threads: list[threading.Thread] = []

    def other() -> str:
        threads.append(threading.current_thread())
        engine.beside.set()
        return "sets"

    try:
        grid, found = reader.grid_beside(shape, info, other)
        assert found == "sets" and threads[0] is not threading.current_thread()
        assert reader.grid_beside(shape, info, other) == (grid, "sets")  # kept: no engine query
        assert engine.runs == 1 and threads[1] is threading.current_thread()
        assert reader.grid_beside(shape, info, None) == (grid, None)

        def failing() -> str:
            raise ValueError("the other read failed")

        with pytest.raises(ValueError, match="other read failed"):
            reader.grid_beside(_shape(students, "SELECT COUNT(*) FROM students"), info, failing)
    finally:
        reader.close()
