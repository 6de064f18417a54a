"""Released sets kept as boxes: per dimension, the values a set allows.

Every accepted WHERE is a conjunction of one-column conditions on dimensions, and a cell
adds one value per grouping column (``guard.query.analyze``), so a released query set
over a table's finest cells is almost always a *box*: the cells whose value on each
dimension (and NULL-ness of each measure) lies in that dimension's allowed set. A box
costs one bit per distinct value of each dimension (~100 bits on bench_core's table),
where the inverted index's line of N bits costs 20 KB on 1M rows (164,206 finest cells)
and its pairs 8 bytes a row; and "which boxes hold this row" is one AND of a row of bits
per dimension, whatever the number of boxes.

A set becomes a box only when it *is* one: its allowed values are those of its own rows
(so the box holds every row of the set) and the box is taken only when it holds exactly
as many of the table's rows as the set (so it holds no other). Nothing about the query
is trusted; a set that is not a box stays in the index's other forms.

The codes are any labelling of each row per dimension (``FinestCells.box_codes``); a
coarser labelling only makes fewer sets boxes, never a wrong one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from guard.arrays import read_only, runs
from guard.history.capacity import grown

__all__ = ["BoxCodes", "BoxIndex"]

Codes = npt.NDArray[np.integer]


@dataclass(frozen=True, eq=False)
class BoxCodes:
    """Each row's value on each dimension, and per dimension the rows of each value
    (``order[j][start[j][v]:start[j][v + 1]]``), to count a box's rows without a pass
    over the table. Read-only, shared by the audit states of one table version."""

    codes: tuple[Codes, ...]
    order: tuple[npt.NDArray[np.uint32], ...]
    start: tuple[npt.NDArray[np.int64], ...]
    #: per dimension, the rows of each value (``start``'s steps, read by every count)
    count: tuple[npt.NDArray[np.int64], ...]
    rows: int

    @classmethod
    def of(cls, codes: Sequence[npt.ArrayLike]) -> BoxCodes:
        """From ``codes[j][row]``, row ``row``'s value on dimension j (0 .. values - 1)."""
        arrays = [np.asarray(c) for c in codes]
        if not arrays:
            raise ValueError("a box needs at least one dimension")
        sizes = {a.size for a in arrays}
        if len(sizes) != 1:
            raise ValueError(f"the dimensions' codes cover different rows: {sorted(sizes)}")
        if any(a.size and int(a.min()) < 0 for a in arrays):
            raise ValueError("codes are numbered from 0")
        packed: list[Codes] = []
        order: list[npt.NDArray[np.uint32]] = []
        start: list[npt.NDArray[np.int64]] = []
        count: list[npt.NDArray[np.int64]] = []
        for a in arrays:
            values = int(a.max()) + 1 if a.size else 0
            small = np.min_scalar_type(max(values - 1, 0))
            packed.append(read_only(a.astype(small)))
            order.append(read_only(np.argsort(a, kind="stable").astype(np.uint32)))
            count.append(read_only(np.bincount(a, minlength=values).astype(np.int64)))
            bounds = np.zeros(values + 1, dtype=np.int64)
            np.cumsum(count[-1], out=bounds[1:])
            start.append(read_only(bounds))
        return cls(tuple(packed), tuple(order), tuple(start), tuple(count), sizes.pop())

    @property
    def values(self) -> list[int]:
        return [c.size for c in self.count]

    def nbytes(self) -> int:
        return sum(a.nbytes for a in (*self.codes, *self.order, *self.start, *self.count))

    def held(self, allowed: Sequence[npt.NDArray[np.bool_] | None], at_least: int = 0) -> int:
        """Rows whose value on every dimension j is allowed (``allowed[j]`` a mask over its
        values; None: every value). ``at_least``: a count the caller knows it is not
        below (the rows of a set inside the box): the dimension that allows only that
        many settles it without a pass over them."""
        restricted = {j: mask for j, mask in enumerate(allowed) if mask is not None}
        if not restricted:
            return self.rows
        counts = self.count
        sizes = {j: int(counts[j][mask].sum()) for j, mask in restricted.items()}
        first = min(sizes, key=sizes.__getitem__)  # the fewest rows to test
        if len(restricted) == 1 or sizes[first] <= at_least:
            return sizes[first]
        values = np.flatnonzero(restricted[first])
        lengths = counts[first][values]
        total = int(lengths.sum())
        # the rows of the allowed values of ``first``: their runs in ``order``, end to end
        candidates = self.order[first][runs(self.start[first][values], lengths)]
        inside = np.ones(total, dtype=bool)
        for j, mask in restricted.items():
            if j != first:
                inside &= mask[self.codes[j][candidates]]
        return int(np.count_nonzero(inside))


class BoxIndex:
    """Boxes over the rows ``codes`` labels, each named by its owner (a set index)."""

    def __init__(self, codes: BoxCodes) -> None:
        self._codes = codes
        #: bits a box costs: one per value of each dimension
        self.bits = sum(codes.values)
        #: per dimension: (boxes / 8) bytes x values; bit b of column v: box b allows value v
        self._allows = [np.zeros((2, v), dtype=np.uint8) for v in codes.values]
        self._owners = np.zeros(16, dtype=np.int64)
        self.boxes = 0

    def add(self, rows: npt.NDArray[np.integer], owner: int) -> bool:
        """Keep the set of ``rows`` (distinct row ids) as a box named ``owner`` if it is one;
        False (nothing kept) when it is not."""
        if not rows.size:
            return False  # an empty set holds no row: nothing to find it by
        masks: list[npt.NDArray[np.bool_] | None] = []
        for codes, values in zip(self._codes.codes, self._codes.values, strict=True):
            allowed = np.zeros(values, dtype=bool)
            allowed[codes[rows]] = True
            # a dimension every value of which is allowed tests nothing
            masks.append(None if bool(allowed.all()) else allowed)
        if self._codes.held(masks, at_least=int(rows.size)) != rows.size:
            return False  # the box holds rows outside the set
        box = self.boxes
        self._allows = [grown(a, (box >> 3) + 1) for a in self._allows]
        bit = np.uint8(1 << (box & 7))
        for table, kept in zip(self._allows, masks, strict=True):
            if kept is None:
                table[box >> 3] |= bit
            else:
                table[box >> 3, kept] |= bit
        self._owners = grown(self._owners, box + 1)
        self._owners[box] = owner
        self.boxes += 1
        return True

    def holding(self, row: int) -> npt.NDArray[np.int64]:
        """The owners of the boxes that hold ``row`` (ascending box order)."""
        if not self.boxes or not 0 <= row < self._codes.rows:
            return np.zeros(0, dtype=np.int64)
        codes, used = self._codes.codes, (self.boxes + 7) >> 3
        line = self._allows[0][:used, int(codes[0][row])].copy()
        for j in range(1, len(codes)):
            line &= self._allows[j][:used, int(codes[j][row])]
        hit = np.flatnonzero(np.unpackbits(line, bitorder="little")[: self.boxes])
        return self._owners[hit]

    def nbytes(self) -> int:
        """The boxes' bits and owners. Not the codes they are read by: one table version's
        audit states share them, and ``BoxCodes.nbytes`` counts them once."""
        return sum(a.nbytes for a in self._allows) + self._owners.nbytes
