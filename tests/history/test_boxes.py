"""Released sets kept as boxes (``guard/history/boxes.py``): a set is kept as a box only
when it is one, and "which boxes hold this row" lists exactly the sets that hold it. The
oracle tests every row against Python sets of the rows appended, and a box by brute
force over the rows' values."""

from __future__ import annotations

import numpy as np
import pytest
from pyroaring import BitMap

from guard.history.boxes import BoxCodes, BoxIndex
from guard.history.inverted import BLOCK, InvertedIndex
from guard.history.released import ReleasedSets


def _table(rng: np.random.Generator, shape: tuple[int, ...], keep: float) -> np.ndarray:
    """The value tuples of a table's finest cells: a random part of the product of
    ``shape`` (not all of it, so a box's rows are not a product of its value counts)."""
    cells = np.array(np.meshgrid(*[np.arange(v) for v in shape], indexing="ij")).reshape(len(shape), -1).T
    cells = cells[rng.random(len(cells)) < keep]
    return cells[rng.permutation(len(cells))]  # rows in no particular order of the values


def _box_rows(cells: np.ndarray, allowed: list[set[int]]) -> np.ndarray:
    inside = np.ones(len(cells), dtype=bool)
    for j, values in enumerate(allowed):
        inside &= np.isin(cells[:, j], sorted(values))
    return np.flatnonzero(inside)


def _is_box(cells: np.ndarray, rows: np.ndarray) -> bool:
    """Brute force: the box of the set's own values holds no other row."""
    allowed = [set(cells[rows, j].tolist()) for j in range(cells.shape[1])]
    return bool(rows.size) and np.array_equal(_box_rows(cells, allowed), np.sort(rows))


def _some(rng: np.random.Generator, shape: tuple[int, ...], least: int = 1) -> list[set[int]]:
    """Per dimension, a random nonempty set of its values (at least ``least``, or 1)."""
    sizes = [int(rng.integers(max(1, min(least, v)), v + 1)) for v in shape]
    return [set(rng.choice(v, size=n, replace=False).tolist()) for v, n in zip(shape, sizes, strict=True)]


def _random_set(rng: np.random.Generator, cells: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    kind = rng.integers(4)
    if kind == 0:  # a box: some values per dimension (a WHERE with IN / BETWEEN / <>, a cell)
        return _box_rows(cells, _some(rng, shape))
    if kind == 1:  # a cell of a GROUP BY: one value on some dimensions
        allowed = [{int(rng.integers(v))} if rng.random() < 0.6 else set(range(v)) for v in shape]
        return _box_rows(cells, allowed)
    if kind == 2:  # a box less one row: not a box (unless the row was alone on a value)
        rows = _box_rows(cells, _some(rng, shape, least=max(shape) - 1))
        return np.delete(rows, rng.integers(rows.size)) if rows.size else rows
    return np.unique(rng.choice(len(cells), size=int(rng.integers(1, 40))))  # anything


@pytest.mark.parametrize("seed", range(4))
def test_a_set_is_kept_as_a_box_exactly_when_it_is_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = (5, 4, 3, 2)
    cells = _table(rng, shape, keep=0.7)
    index = BoxIndex(BoxCodes.of([cells[:, j] for j in range(len(shape))]))
    oracle: dict[int, set[int]] = {}
    boxes = others = 0
    for owner in range(300):
        rows = _random_set(rng, cells, shape)
        kept = index.add(rows, owner)
        assert kept == _is_box(cells, rows), (owner, rows)
        if kept:
            oracle[owner] = set(rows.tolist())
            boxes += 1
        else:
            others += 1
        if owner % 13 == 0:
            for row in range(len(cells)):
                expected = sorted(o for o, s in oracle.items() if row in s)
                assert index.holding(row).tolist() == expected, (owner, row)
    assert boxes > 50 and others > 50  # both kinds were tried
    assert index.holding(len(cells)).size == 0 and index.holding(-1).size == 0


def test_a_diagonal_is_not_a_box() -> None:
    """{(0, 0), (1, 1)} allows 0 and 1 on both dimensions, a box that also holds (0, 1)
    and (1, 0): kept as a box it would be found holding rows it does not hold."""
    cells = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    index = BoxIndex(BoxCodes.of([cells[:, 0], cells[:, 1]]))
    assert not index.add(np.array([0, 3]), owner=7)
    assert index.add(np.array([0, 1]), owner=8)  # (0, *): a box
    assert index.holding(1).tolist() == [8] and index.holding(2).tolist() == []


def test_held_counts_the_rows_of_a_box() -> None:
    rng = np.random.default_rng(5)
    shape = (7, 3, 4)
    cells = _table(rng, shape, keep=0.5)
    codes = BoxCodes.of([cells[:, j] for j in range(len(shape))])
    for _ in range(200):
        allowed = _some(rng, shape)
        pairs = zip(allowed, shape, strict=True)
        masks = [None if len(a) == v else np.isin(np.arange(v), sorted(a)) for a, v in pairs]
        assert codes.held(masks) == _box_rows(cells, allowed).size


def test_codes_are_checked() -> None:
    with pytest.raises(ValueError, match="different rows"):
        BoxCodes.of([np.zeros(3, dtype=np.int64), np.zeros(4, dtype=np.int64)])
    with pytest.raises(ValueError, match="from 0"):
        BoxCodes.of([np.array([0, -1])])
    with pytest.raises(ValueError, match="at least one"):
        BoxCodes.of([])
    with pytest.raises(ValueError, match="label 3 rows"):
        InvertedIndex(4, BoxCodes.of([np.zeros(3, dtype=np.int64)]))


@pytest.mark.parametrize("seed", range(3))
def test_a_column_with_boxes_lists_exactly_the_sets_holding_the_row(seed: int) -> None:
    """Boxes, pairs and lines together in ``ReleasedSets.column``, through several
    blocks of the index."""
    rng = np.random.default_rng(seed)
    shape = (6, 5, 4, 2)
    cells = _table(rng, shape, keep=0.8)
    released = ReleasedSets(len(cells), BoxCodes.of([cells[:, j] for j in range(len(shape))]))
    oracle: list[set[int]] = []
    for step in range(5 * BLOCK + 3):
        rows = _random_set(rng, cells, shape)
        released.append(rows, tag=step)
        oracle.append(set(rows.tolist()))
        if step % 11 == 0 or step > 4 * BLOCK:
            for row in rng.choice(len(cells), size=6).tolist():
                expected = np.array([row in s for s in oracle], dtype=bool)
                assert np.array_equal(released.column(row), expected), (step, row)


def test_boxes_cost_a_few_bits_a_set() -> None:
    """Large box-shaped sets indexed as boxes, not as lines of N bits each."""
    rng = np.random.default_rng(1)
    shape = (50, 20, 8, 2)
    cells = _table(rng, shape, keep=0.9)
    universe = len(cells)
    codes = BoxCodes.of([cells[:, j] for j in range(len(shape))])
    stored = []
    for _ in range(4 * BLOCK):
        stored.append(BitMap(_box_rows(cells, _some(rng, shape, least=25)).astype(np.uint32)))
    with_boxes, lines = InvertedIndex(universe, codes), InvertedIndex(universe)
    with_boxes.catch_up(stored)
    lines.catch_up(stored)
    sets_bytes = with_boxes.nbytes()
    assert sets_bytes * 50 < lines.nbytes()
    for row in rng.choice(universe, size=20).tolist():
        assert sorted(with_boxes.holding(row).tolist()) == sorted(lines.holding(row).tolist())
