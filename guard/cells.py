"""The cells of one answer, as the protection stage sees them, and where they come from
(stages 4-5: the plan, run on the engine)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from guard.backends.base import Backend, ResultSet, TableInfo
from guard.plan.rewrite import Plan, rewrite
from guard.query.shape import QueryShape, typed_predicates

__all__ = ["MAX_CACHED_CELLS", "Cell", "CellGrid", "CellReader", "cells_from_result"]

#: cells the grids kept by a :class:`CellReader` hold at most (a larger grid is not kept)
MAX_CACHED_CELLS = 100_000

T = TypeVar("T")


@dataclass(frozen=True)
class Cell:
    """One aggregate value of one group, with the public size of its query set."""

    value: Any
    #: distinct privacy units in the cell's query set
    units: int
    #: N: distinct privacy units the complement is taken in (the whole table)
    population: int
    #: SUM/AVG with a contribution depth: the largest per-unit magnitudes |x_u|,
    #: descending, at most ``depth`` of them (fewer when fewer units have a value);
    #: () when not computed (COUNT, depth 0)
    top: tuple[float, ...] = ()
    #: Σ_u |x_u| over the cell, in the measure's unit (0.0 for a cell without values);
    #: None when not computed
    magnitude: float | None = None


@dataclass(frozen=True)
class CellGrid:
    """Rows (groups) by aggregates. ``keys[r]`` are the group's dimension values.

    ``rolled_up[r][i]`` is True when key ``i`` of ``shape.group_by`` is a total in row
    ``r`` (its key value is then None); all False in the rows of a plain GROUP BY. It has
    one entry per row, or is ``()`` for a grid built without it (and for no rows).
    """

    keys: tuple[tuple[Any, ...], ...]
    cells: tuple[tuple[Cell, ...], ...]
    rolled_up: tuple[tuple[bool, ...], ...] = ()


def cells_from_result(shape: QueryShape, plan: Plan, result: ResultSet, info: TableInfo) -> CellGrid:
    """The grid of ``result``, the rows of ``plan.query`` for ``shape``.

    Engine numbers in the contribution slots (DECIMAL, HUGEINT, lists of them) become
    floats; the row order is the engine's (group keys, then grouping id).
    """
    populations = [info.population(a.column) for a in shape.aggregates]
    width = len(shape.aggregates)
    slots = list(
        zip(
            plan.value_slots,
            plan.unit_slots,
            populations,
            plan.top_slots or (None,) * width,
            plan.magnitude_slots or (None,) * width,
            strict=True,
        )
    )
    plain = all(t is None and m is None for *_, t, m in slots)
    detail = (False,) * len(shape.group_by)
    masks: dict[int, tuple[bool, ...]] = {}
    g = plan.grouping_slot
    keys = []
    cells = []
    rolled_up = []
    for row in result.rows:
        keys.append(tuple(row[slot] for slot in plan.key_slots))
        if g is None:
            rolled_up.append(detail)
        else:
            gid = int(row[g])
            if gid not in masks:
                masks[gid] = shape.rolled_up(gid)
            rolled_up.append(masks[gid])
        if plain:
            cells.append(tuple(Cell(row[v], int(row[u] or 0), n) for v, u, n, _, _ in slots))
            continue
        cells.append(
            tuple(
                Cell(
                    row[v],
                    int(row[u] or 0),
                    n,
                    top=() if t is None else _floats(row[t]),
                    magnitude=None if m is None else float(row[m] or 0),
                )
                for v, u, n, t, m in slots
            )
        )
    return CellGrid(tuple(keys), tuple(cells), tuple(rolled_up))


def _floats(values: Sequence[Any] | None) -> tuple[float, ...]:
    # a ranked top-n (engines without a top-n aggregate) holds NULL past a cell's last unit
    return () if values is None else tuple(float(v) for v in values if v is not None)


class CellReader:
    """Stages 4-5 with memory: the grid of one shape on one data version is planned and
    read from the engine once, then shared (grids are immutable).

    A data version is a fingerprint of the table's content and declaration, and the
    engine reads a snapshot of it, so a grid depends on the version and the shape only,
    never on what was released: the protection stages still decide each request anew.
    Thread-safe; two threads missing the same grid at once both read it.
    """

    def __init__(self, backend: Backend, depth: int, limit: int = MAX_CACHED_CELLS) -> None:
        """``depth``: the largest contributions per cell the rules read; ``limit``: cells kept."""
        self._backend = backend
        self._depth = depth
        self._limit = limit
        self._lock = threading.Lock()
        #: (grid, its cells) by key, least recently used first
        self._grids: OrderedDict[Hashable, tuple[CellGrid, int]] = OrderedDict()
        self._kept = 0
        self._beside = ThreadPoolExecutor(max_workers=2, thread_name_prefix="guard-beside")

    def kept(self, shape: QueryShape, info: TableInfo) -> CellGrid | None:
        """The grid of ``shape`` on ``info``'s version if it is kept, else None (no engine
        query)."""
        key = (info.name, info.data_version, shape, typed_predicates(shape.predicates))
        with self._lock:
            found = self._grids.get(key)
            if found is not None:
                self._grids.move_to_end(key)
                return found[0]
        return None

    def grid_beside(
        self, shape: QueryShape, info: TableInfo, other: Callable[[], T] | None
    ) -> tuple[CellGrid, T | None]:
        """:meth:`grid` and ``other()`` (None when not given). When the grid is not kept
        (a first answer), ``other`` runs on a thread of its own while the engine reads the
        grid: the history audit's query-set query on the finest cells and the cell query
        each wait on DuckDB, which runs without the GIL, on its own connection.

        Raises:
            BackendError: the engine failed; or what ``other`` raised.
        """
        if other is None:
            return self.grid(shape, info), None
        kept = self.kept(shape, info)
        if kept is not None:
            return kept, other()
        beside = self._beside.submit(other)
        grid = self.grid(shape, info)
        return grid, beside.result()

    def close(self) -> None:
        """Stop the thread :meth:`grid_beside` runs ``other`` on."""
        self._beside.shutdown(wait=True)

    def grid(self, shape: QueryShape, info: TableInfo) -> CellGrid:
        """The cells of ``shape`` (as planned: averages with their sums) on ``info``'s version.

        Raises:
            BackendError: the engine failed.
        """
        key = (info.name, info.data_version, shape, typed_predicates(shape.predicates))
        found = self.kept(shape, info)
        if found is not None:
            return found
        plan = rewrite(shape, info, self._depth, self._backend.capabilities)
        grid = cells_from_result(shape, plan, self._backend.execute(plan.query), info)
        size = len(grid.cells) * max(1, len(shape.aggregates))
        if size <= self._limit // 10:  # a few large grids must not push out every small one
            with self._lock:
                if key not in self._grids:
                    self._grids[key] = (grid, size)
                    self._kept += size
                while self._kept > self._limit:
                    _, (_, dropped) = self._grids.popitem(last=False)
                    self._kept -= dropped
        return grid
