"""The 9-student table of seed 002 in plain duckdb, with an immutable surrogate ``_rid``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import numpy as np
import numpy.typing as npt
import pytest

STUDENTS_CSV = Path(__file__).resolve().parents[2] / "examples" / "students" / "students.csv"

RowsOf = Callable[[str], npt.NDArray[np.int64]]


def load_students(con: duckdb.DuckDBPyConnection, table: str = "students") -> None:
    """``_rid`` numbers the rows in file order, assigned once at load."""
    con.execute(
        f"CREATE TABLE {table} AS SELECT (row_number() OVER () - 1)::BIGINT AS _rid, * "
        f"FROM read_csv('{STUDENTS_CSV}')"
    )


def rows_where(con: duckdb.DuckDBPyConnection, table: str, where: str) -> npt.NDArray[np.int64]:
    """The query set of ``SELECT ... FROM table WHERE where``: its ``_rid`` values."""
    found = con.execute(f"SELECT _rid FROM {table} WHERE {where} ORDER BY _rid").fetchnumpy()["_rid"]
    return np.asarray(found, dtype=np.int64)


@pytest.fixture
def students_db() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    load_students(con)
    yield con
    con.close()


@pytest.fixture
def rows_of(students_db: duckdb.DuckDBPyConnection) -> RowsOf:
    return lambda where: rows_where(students_db, "students", where)
