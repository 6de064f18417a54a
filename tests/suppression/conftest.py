"""Tables shared by the suppression tests, as session fixtures (tests are not packages)."""

from __future__ import annotations

import gzip
import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from guard.suppression import TOTAL, Key, Relation, Table

#: Castro (2012) magnitude table of seed 000: salaries by town M and profession P
CASTRO = {
    "M1": (360, 450, 720, 400, 360),
    "M2": (1440, 540, 22, 570, 320),
    "M3": (722, 1178, 375, 800, 363),
}

GridTable = Callable[[Sequence[Sequence[float]]], Table]
CubeTable = Callable[[np.ndarray], Table]


def _cube_table(values: np.ndarray) -> Table:
    """An n-D table with every marginal (what GROUP BY CUBE returns)."""
    cells: dict[Key, float] = {}
    for key in itertools.product(*[[*range(size), TOTAL] for size in values.shape]):
        index = tuple(slice(None) if k is TOTAL else k for k in key)
        cells[key] = float(np.sum(values[index]))
    return Table.from_cells(cells)


def _grid_table(grid: Sequence[Sequence[float]]) -> Table:
    """A 2-D table keyed (row, column) with row, column and grand totals."""
    return _cube_table(np.asarray(grid, dtype=float))


@pytest.fixture(scope="session")
def castro_cells() -> dict[Key, float]:
    cells: dict[Key, float] = {}
    for town, row in CASTRO.items():
        for j, value in enumerate(row):
            cells[(town, f"P{j + 1}")] = value
        cells[(town, TOTAL)] = sum(row)
    for j in range(5):
        cells[(TOTAL, f"P{j + 1}")] = sum(row[j] for row in CASTRO.values())
    cells[(TOTAL, TOTAL)] = sum(sum(row) for row in CASTRO.values())
    return cells


@pytest.fixture(scope="session")
def castro(castro_cells: dict[Key, float]) -> Table:
    return Table.from_cells(castro_cells)


@pytest.fixture(scope="session")
def grid_table() -> GridTable:
    return _grid_table


@pytest.fixture(scope="session")
def cube_table() -> CubeTable:
    return _cube_table


#: a real attacker view captured from the guard (test_deviation_scale.py)
DEVIATION_SCALE = Path(__file__).parent / "data" / "deviation_scale.json.gz"


@pytest.fixture(scope="session")
def scale_table() -> Table:
    """The captured attacker view's cells and relations, with the default bounds."""
    with gzip.open(DEVIATION_SCALE, "rt") as f:
        doc = json.load(f)
    keys = [tuple(TOTAL if x is None else x for x in k) for k in doc["keys"]]
    relations = [Relation(keys[t], tuple(keys[m] for m in members)) for t, members in doc["relations"]]
    return Table.from_cells(dict(zip(keys, doc["values"], strict=True)), relations=relations)
