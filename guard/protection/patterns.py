"""The cells of whole key patterns, kept per data version for the next linked answer.

A linked answer is protected together with the cells an attacker reasons with: every
cell of the released patterns' lattice over the whole table (``view.attacker_view``,
through :attr:`Linking.fetch`). On a busy table that is tens of thousands of cells
(57,000 on bench_core's income tables at 100,000 rows, 0.5-1.3 s to read and encode),
and each new answer asked for them all again although a pattern's cells depend on the
data version only. :class:`PatternCache` wraps a linking's ``fetch``: it reads from the
engine only the patterns it does not hold and keeps each pattern's cells (bounded, least
recently used first out).

The cells must come out as the engine would have returned them in one query, in the
same order too, since the suppression's problem (and so which cells it withholds)
follows the order of its cells. The engine orders the rows of a fetch by each grouping
key, NULLs last, then by the grouping id (``guard.plan.rewrite``); restricted to one
pattern that is the pattern's own order, so the parts are merged by the same key:
per dimension, its value's rank among the values present (a NULL and a total last),
then the totals' positions, first dimension first (the grouping id's bits, most
significant first). Values are compared as the engines compare them (numbers by value,
text by code point, which is UTF-8 byte order, dates and times by time); a value this
cannot order (a NaN, a type without a tag) is read in one query as before. A fetch is read
only when first iterated; its size alone (``len``) is the cells held plus, for each
pattern not held, its groups counted in the engine (``SELECT COUNT(*)`` over the same
rows grouped by the pattern's dimensions: no cells built, no keys encoded). A refinement
too large to use is then never read: ``view.attacker_view`` reads the common margins
alone (at 1,000,000 rows q13's refinement took 3 s to read and encode). A count that
disagrees with the cells read later fails the answer (it may have been acted on).

Nothing here decides anything: the cells are public-shape aggregates the protection
stage reads, the same with or without the cache. The cache key holds the data version
(and the answer's own filter when the fetch is filtered), so a new version reads anew.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np
import numpy.typing as npt
from sqlglot import exp

from guard.backends.base import Backend, TableInfo
from guard.cells import Cell
from guard.plan.sql import column, where
from guard.protection.linking import Fetch, Linking, Pattern
from guard.protection.relations import pattern
from guard.query.shape import Condition, QueryShape, typed_predicates
from guard.suppression import TOTAL, Key

__all__ = ["MAX_CACHED_PATTERN_CELLS", "PatternCache"]

#: pattern cells kept at most (a pattern larger than this is not kept)
MAX_CACHED_PATTERN_CELLS = 300_000
#: pattern sizes kept at most (counted, never read)
MAX_COUNTS = 10_000


class _Unordered(Exception):
    """A key value the merge cannot order as the engine does."""


@dataclass
class _Part:
    """The cells of one pattern, in the engine's order."""

    keys: list[Key]
    cells: list[Cell]
    #: per key position: the sorted distinct values (decoded), and per row the index of
    #: its value there (len(values): a NULL or a total); computed when first merged
    values: list[list[object]] | None = None
    codes: npt.NDArray[np.int64] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def coded(self, width: int) -> tuple[list[list[object]], npt.NDArray[np.int64]]:
        with self.lock:
            if self.values is None or self.codes is None:
                values: list[list[object]] = []
                codes = np.empty((len(self.keys), width), dtype=np.int64)
                for j in range(width):
                    texts = [key[j] for key in self.keys]
                    decoded = {t: _decoded(t) for t in dict.fromkeys(texts)}  # each text once
                    try:
                        distinct = sorted({v for v in decoded.values() if v is not None})  # type: ignore[type-var]
                    except TypeError as error:
                        raise _Unordered from error
                    index = {v: i for i, v in enumerate(distinct)}
                    code = {t: len(distinct) if v is None else index[v] for t, v in decoded.items()}
                    codes[:, j] = [code[t] for t in texts]
                    values.append(distinct)
                self.values, self.codes = values, codes
            return self.values, self.codes


def _decoded(text: Hashable) -> object:
    """A key position (``keys.encode_value``'s tagged text) as a value that orders as the
    engine orders the column; None for a NULL or a total."""
    if text is TOTAL or text == "null":
        return None
    if not isinstance(text, str) or len(text) < 2 or text[1] != ":":
        raise _Unordered
    tag, body = text[0], text[2:]
    if tag == "s":
        return body
    if tag == "n":
        try:
            return int(body)
        except ValueError:
            number = float(body)
            if number != number:  # NaN: engines order it past every number; Python cannot
                raise _Unordered from None
            return number
    if tag == "b":
        return body == "true"
    if tag == "t":
        return dt.datetime.fromisoformat(body)  # a date as its midnight: one type per column
    raise _Unordered


class PatternCache:
    """Cells of key patterns over whole tables (or one answer's filter), per data version.

    Thread-safe. Cells are immutable and shared between answers.
    """

    def __init__(self, backend: Backend | None = None, limit: int = MAX_CACHED_PATTERN_CELLS) -> None:
        """``backend``: where patterns not held are counted before they are read (None:
        a fetch's size is known only once it is read)."""
        self._backend = backend
        self._limit = limit
        self._lock = threading.Lock()
        self._parts: OrderedDict[Hashable, _Part] = OrderedDict()
        self._kept = 0
        #: cells per (scope, pattern) counted in the engine, never read (bounded)
        self._counts: OrderedDict[Hashable, int] = OrderedDict()

    @property
    def kept(self) -> int:
        """Cells held now."""
        return self._kept

    def linking(self, linking: Linking, shape: QueryShape, info: TableInfo) -> Linking:
        """``linking`` whose ``fetch`` reads only the patterns this cache does not hold
        (``shape``: the answer, whose filter a filtered fetch applies). What it returns
        reads them when first iterated; its size alone is counted in the engine."""
        inner = linking.fetch
        if inner is None:
            return linking
        width = len(linking.dimensions)
        predicates = typed_predicates(shape.predicates)

        def fetch(space: str, patterns: Sequence[Pattern], filtered: bool) -> Mapping[Key, Cell]:
            scope = (info.data_version, info.name, space, predicates if filtered else None)
            wanted = list(dict.fromkeys(patterns))
            parts = {p: self._get((scope, p)) for p in wanted}
            read = partial(self._read, inner, space, filtered, scope, wanted, parts, width)
            missing = [p for p, part in parts.items() if part is None]
            count: Callable[[], Mapping[Pattern, int]] | None = dict  # nothing to count
            if missing:
                count = None  # known only once read
            if missing and self._backend is not None:
                dimensions = linking.dimensions
                conditions = shape.predicates if filtered else ()
                count = partial(self._count, info, dimensions, conditions, scope, missing)
            held = sum(len(part.keys) for part in parts.values() if part is not None)
            return _Fetched(read, held, count)

        return replace(linking, fetch=fetch)

    def _read(
        self,
        inner: Fetch,
        space: str,
        filtered: bool,
        scope: Hashable,
        wanted: list[Pattern],
        parts: dict[Pattern, _Part | None],
        width: int,
        counted: Mapping[Pattern, int] | None,
    ) -> Mapping[Key, Cell]:
        """The cells of ``wanted``: those not held read in one query (and kept), merged
        with those held; ``counted``: the sizes reported for the patterns read."""
        missing = [p for p, part in parts.items() if part is None]
        if missing:
            got = inner(space, missing, filtered)
            split: dict[Pattern, _Part] = {p: _Part([], []) for p in missing}
            for key, cell in got.items():
                part = split.get(pattern(key))
                if part is None:  # not a pattern asked for: keep nothing from this read
                    return got if len(missing) == len(wanted) else inner(space, wanted, filtered)
                part.keys.append(key)
                part.cells.append(cell)
            for p, part in split.items():
                if counted is not None and counted[p] != len(part.keys):
                    # the size was counted wrong, and may have been acted on: fail closed
                    raise RuntimeError("pattern cache: a pattern's count and its cells disagree")
                self._put((scope, p), part)
            if len(missing) == len(wanted):
                return got  # one read: the engine's own order
            parts = {**parts, **split}
        held = [part for part in parts.values() if part is not None]
        try:
            return _merged(held, width)
        except _Unordered:  # a key the merge cannot order: every pattern read in one query
            return inner(space, wanted, filtered)

    def _count(
        self,
        info: TableInfo,
        dimensions: Sequence[str],
        conditions: tuple[Condition, ...],
        scope: Hashable,
        patterns: Sequence[Pattern],
    ) -> dict[Pattern, int]:
        """The cells of each of ``patterns``, counted in the engine: the groups of the
        rows the fetch reads (``conditions``), as its GROUP BY forms them (NULL one
        value), one row without any dimension."""
        assert self._backend is not None
        found: dict[Pattern, int] = {}
        for p in patterns:
            with self._lock:
                known = self._counts.get((scope, p))
            if known is None:
                keys = [d for d, fixed in zip(dimensions, p, strict=True) if fixed]
                known = 1 if not keys else self._groups(info.name, keys, conditions)
                with self._lock:
                    self._counts[(scope, p)] = known
                    while len(self._counts) > MAX_COUNTS:
                        self._counts.popitem(last=False)
            found[p] = known
        return found

    def _groups(self, table: str, keys: Sequence[str], conditions: tuple[Condition, ...]) -> int:
        assert self._backend is not None
        rows = exp.select(exp.Literal.number(1)).from_(exp.to_table(table, quoted=True))
        condition = where(conditions)
        if condition is not None:
            rows = rows.where(condition)
        rows = rows.group_by(*[column(k) for k in keys])
        query = exp.select(exp.Count(this=exp.Star())).from_(rows.subquery("__groups"))
        return int(self._backend.execute(query).rows[0][0])

    def _get(self, key: Hashable) -> _Part | None:
        with self._lock:
            part = self._parts.get(key)
            if part is not None:
                self._parts.move_to_end(key)
            return part

    def _put(self, key: Hashable, part: _Part) -> None:
        size = len(part.keys)
        if size > self._limit:
            return
        with self._lock:
            if key in self._parts:
                return
            self._parts[key] = part
            self._kept += size
            while self._kept > self._limit:
                _, dropped = self._parts.popitem(last=False)
                self._kept -= len(dropped.keys)


class _Fetched(Mapping[Key, Cell]):
    """The cells of one fetch, read (``read``) only when first iterated: a caller that
    needs only their number (a refinement too large to use) never reads them. The number
    is the cells held plus those ``count`` reports for the patterns not held."""

    def __init__(
        self,
        read: Callable[[Mapping[Pattern, int] | None], Mapping[Key, Cell]],
        held: int,
        count: Callable[[], Mapping[Pattern, int]] | None,
    ) -> None:
        self._read = read
        self._held = held
        self._count = count
        self._counted: Mapping[Pattern, int] | None = None
        self._cells: Mapping[Key, Cell] | None = None

    def _all(self) -> Mapping[Key, Cell]:
        if self._cells is None:
            self._cells = self._read(self._counted)
        return self._cells

    def __len__(self) -> int:
        if self._cells is not None:
            return len(self._cells)
        if self._count is None:
            return len(self._all())
        if self._counted is None:
            self._counted = self._count()
        return self._held + sum(self._counted.values())

    def __getitem__(self, key: Key) -> Cell:
        return self._all()[key]

    def __iter__(self) -> Iterator[Key]:
        return iter(self._all())


def _merged(parts: Sequence[_Part], width: int) -> dict[Key, Cell]:
    """The cells of ``parts`` in the order the engine returns them from one query: by each
    position's value (NULLs and totals last), then by which positions are totals."""
    parts = [part for part in parts if part.keys]
    if len(parts) == 1:
        return dict(zip(parts[0].keys, parts[0].cells, strict=True))
    coded = [part.coded(width) for part in parts]
    columns: list[npt.NDArray[np.int64]] = []
    for j in range(width):
        try:
            distinct = sorted({v for values, _ in coded for v in values[j]})  # type: ignore[type-var]
        except TypeError as error:
            raise _Unordered from error
        rank = {v: i for i, v in enumerate(distinct)}
        pieces = []
        for values, codes in coded:
            # a part's own codes to the merged ranks; its last code (NULL, total) to the end
            table = np.asarray([rank[v] for v in values[j]] + [len(distinct)], dtype=np.int64)
            pieces.append(table[codes[:, j]])
        columns.append(np.concatenate(pieces))
    for j in range(width):
        columns.append(
            np.concatenate(
                [np.full(len(part.keys), part.keys[0][j] is TOTAL, dtype=np.int64) for part in parts]
            )
        )
    order = np.lexsort(columns[::-1])  # lexsort's last key is the primary one
    keys = [key for part in parts for key in part.keys]
    cells = [cell for part in parts for cell in part.cells]
    return {keys[i]: cells[i] for i in order.tolist()}
