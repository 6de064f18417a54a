"""The finest cells of a table: the smallest groups of rows any accepted query can tell apart.

Predicates and groupings may only name dimensions (``guard.query.analyze``), and an
aggregate's query set also depends on which measures are NULL. So every query set is a
union of *finest cells*: rows that agree on every dimension and on the NULL-ness of every
measure. Row-level atoms (``atoms.py``) are then unions of finest cells, and auditing over
finest-cell ids instead of row ids gives the same decisions with far fewer "rows": the
audit's cost follows the number of distinct dimension combinations, not the table size.

The cells are read once per (data version, table) with one backend query and kept in a
private in-memory DuckDB table with the same column types, where a query's own WHERE
clause selects its cells with the engine's semantics (NULLs, casts) exactly. The table
holds public dimension values and row counts, never a measure value.

A float dimension's NaN is a value of its own, apart from NULL, as in the engine (GROUP BY
keeps the two groups apart, ``IS NULL`` selects only NULL, NaN sorts above every number):
the private table keeps it a NaN, and a key names it ``NAN_TEXT`` (``keys.normalized``),
where a data frame alone would read both as NaN.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import duckdb
import numpy as np
import numpy.typing as npt
import pandas as pd
import sqlglot
from pyroaring import BitMap
from sqlglot import exp

from guard.arrays import read_only
from guard.backends.base import Backend, TableInfo
from guard.history.boxes import BoxCodes
from guard.history.keys import CellKey, normalized
from guard.history.lineage import VersionRows
from guard.plan.sql import where as _where
from guard.policy.model import Role, Table
from guard.query.shape import QueryShape, typed_predicates
from guard.result import NAN_TEXT, is_nan

__all__ = ["FinestCells", "SpaceCells"]

Ids = npt.NDArray[np.int64]

_ID = "__finest_id"
_ROWS = "__rows"
_UNITS = "__units"


def _plain(value: object, engine_type: str) -> object:
    """A pandas / numpy group value as the engine returns it (NaN / NaT: NULL, a float
    NaN having been named by ``_nan_named``; a DATE column's timestamps as dates), so
    that its key matches the answer's."""
    if value is None or value is pd.NaT or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, pd.Timestamp):
        return value.date() if engine_type.upper() == "DATE" else value.to_pydatetime()
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def _as_digests(values: npt.NDArray[Any], native: bool) -> npt.NDArray[np.uint64]:
    return np.asarray(values, dtype=np.uint64) if native else _digests([str(v) for v in values])


def _digests(values: list[str], *, text: bool = True) -> npt.NDArray[np.uint64]:
    """64-bit digests: the first 8 bytes (little-endian) of engine md5 texts, or blake2b
    of other texts."""
    if not values:
        return np.zeros(0, dtype=np.uint64)
    if text:
        raw = bytes.fromhex("".join(v[:16] for v in values))
    else:
        raw = b"".join(hashlib.blake2b(v.encode(), digest_size=8).digest() for v in values)
    return np.frombuffer(raw, dtype="<u8").astype(np.uint64)


#: finest-cell ids the query-set cache of one table version holds at most (8 bytes each)
MAX_CACHED_IDS = 2_000_000


def _selection_key(shape: QueryShape, spaces: Sequence[tuple[str, str | None, frozenset[int]]]) -> Hashable:
    """What a query's sets depend on: its predicates with each constant's type (``1``,
    ``1.0`` and ``True`` are equal in Python, not to the engine), grouping and spaces."""
    return typed_predicates(shape.predicates), shape.group_by, shape.levels, tuple(spaces)


def _null_flag(measure: str) -> str:
    return f"__null_{measure}"


def _nan_flag(dimension: str) -> str:
    return f"__nan_{dimension}"


def _nan_named(column: pd.Series, null: npt.NDArray[np.bool_]) -> npt.NDArray[Any]:
    """A frame's float ``column`` (NULL and NaN both NaN) with NULL as None (``null``) and
    NaN as its name."""
    values = column.to_numpy(dtype=object, copy=True)
    values[pd.isna(values) & ~null] = NAN_TEXT
    values[null] = None
    return values


def _nan_cells(
    rows: Sequence[Sequence[Any]], position: int, engine_type: str
) -> npt.NDArray[np.bool_] | None:
    """Which cells (``rows``) hold a NaN at ``position``; None when none does."""
    if not any(name in engine_type.upper() for name in ("DOUBLE", "FLOAT", "REAL")):
        return None  # only floats have a NaN
    found = np.fromiter((is_nan(row[position]) for row in rows), dtype=bool, count=len(rows))
    return found if found.any() else None


@dataclass(frozen=True)
class SpaceCells:
    """One aggregate's query sets in one answer: per cell key, its sorted finest-cell ids."""

    space: str
    #: the column whose non-NULL rows the aggregate reads (None: every row)
    column: str | None
    #: indexes into the query's aggregates that read these query sets
    aggregates: frozenset[int]
    cells: Mapping[CellKey, Ids]
    #: what the sets depend on (the selection's predicates, grouping and spaces) and the
    #: data version: equal selections name the same sets (the screen remembers by it)
    selection: Hashable = None


class FinestCells:
    """The finest cells of one table at one data version (thread-safe reads)."""

    def __init__(self, backend: Backend, table: Table, info: TableInfo) -> None:
        self.table = table.name
        self.data_version = info.data_version
        self._dimensions = tuple(c.lower() for c in table.names(Role.DIMENSION))
        self._measures = tuple(c.lower() for c in table.names(Role.MEASURE))
        # a row's identity across versions reads what the source holds, never a derived
        # dimension: new bands must not make every row a new unknown (lineage.py)
        # (dimensions, then measures: the order earlier versions' digests were made in)
        stored = [c for c in table.stored if c.role is not Role.IDENTIFIER]
        self._content = tuple(
            c.name.lower() for role in (Role.DIMENSION, Role.MEASURE) for c in stored if c.role is role
        )
        self._types = {c: info.types[c] for c in (*self._dimensions, *self._measures) if c in info.types}
        self._one_row_per_unit = info.one_row_per_unit
        self._lock = threading.Lock()
        self._unit_offsets: Ids | None = None
        self._box_codes: BoxCodes | None = None
        #: query sets by selection (``query_sets``), least recently used first
        self._sets: OrderedDict[Hashable, list[SpaceCells]] = OrderedDict()
        self._cached = 0  # finest-cell ids held in ``_sets``
        self._con = duckdb.connect(":memory:")
        self._load(backend)

    @property
    def count(self) -> int:
        """Number of finest cells."""
        return int(self._rows.size)

    @property
    def disjoint(self) -> bool:
        """No privacy unit spans two finest cells (one row per unit): ``units`` adds up."""
        return self._unit_maps is None

    def units(self, ids: Ids) -> int:
        """Privacy units in the union of finest cells ``ids``."""
        if ids.size == 0:
            return 0
        if self._unit_maps is None:
            return int(self._rows[ids].sum())
        return len(BitMap.union(*(self._unit_maps[int(i)] for i in ids)))

    def unit_weights(self) -> Ids | None:
        """Per finest cell its units where they add up (``units`` sums them), else None."""
        return self.row_counts() if self._unit_maps is None else None

    def unit_ids(self, ids: Ids) -> BitMap:
        """The privacy units in the union of finest cells ``ids``, as ids. With one row per
        unit the cells share no unit, so cell i's units are numbered by its rows."""
        if self._unit_maps is not None:
            return BitMap.union(BitMap(), *(self._unit_maps[int(i)] for i in ids))
        offsets = self._offsets()
        found = BitMap()
        for i in np.asarray(ids, dtype=np.int64).tolist():
            found.add_range(int(offsets[i]), int(offsets[i + 1]))
        return found

    def _offsets(self) -> Ids:
        if self._unit_offsets is None:
            self._unit_offsets = np.concatenate([[0], np.cumsum(self._rows)]).astype(np.int64)
        return self._unit_offsets

    def identities(self, backend: Backend) -> VersionRows:
        """This version's rows for the lineage (``lineage.py``): per row its finest cell
        (numbered in the order ``_load`` uses), a 64-bit digest of its content and one of
        its unit: the first 8 bytes of an md5, little-endian (DuckDB's md5_number_upper;
        other engines return the md5 text and the same 8 bytes are read here)."""
        native = backend.capabilities.dialect == "duckdb"
        key_columns = [f'"{d}"' for d in self._dimensions] + [f'("{m}" IS NULL)' for m in self._measures]
        if native:
            # a row's cell by the hash of its key, matched below against the same hash of
            # each finest cell (same DuckDB, same types): no sort of the table
            cell = f"HASH({', '.join(key_columns)})" if key_columns else "0"
        else:
            ordered = [f"{k} NULLS FIRST" for k in key_columns]
            cell = f"DENSE_RANK() OVER (ORDER BY {', '.join(ordered)}) - 1" if key_columns else "0"
        content = [f"COALESCE(CAST(\"{c}\" AS VARCHAR), '\\N')" for c in self._content]
        content.append('CAST("_ukey" AS VARCHAR)')
        digest = "MD5_NUMBER_UPPER" if native else "MD5"
        sql = (
            f"SELECT {cell} AS cell, {digest}(CONCAT_WS('|', {', '.join(content)})) AS row_digest, "
            f'{digest}(CAST("_ukey" AS VARCHAR)) AS unit_digest FROM "{self.table}"'
        )
        columns = backend.execute_columns(sqlglot.parse_one(sql, read="duckdb"))
        private = [f'"{d}"' for d in self._dimensions] + [f'"{_null_flag(m)}"' for m in self._measures]
        with self._lock:
            frame = self._con.execute(f'SELECT * EXCLUDE ("{_ID}") FROM finest ORDER BY "{_ID}"').fetchall()
            hashes = self._con.execute(
                f"SELECT {'HASH(' + ', '.join(private) + ')' if private else '0'} AS h FROM finest "
                f'ORDER BY "{_ID}"'
            ).fetchnumpy()["h"]
        cells = np.asarray(columns["cell"])
        if native:
            order = np.argsort(hashes, kind="stable")
            position = np.searchsorted(hashes[order], cells)
            cells = order[np.minimum(position, order.size - 1)]
            if not np.array_equal(np.asarray(hashes)[cells], np.asarray(columns["cell"])):
                raise RuntimeError("history lineage: a row's cell is not among the finest cells")
        return VersionRows(
            self.data_version,
            _digests([repr(tuple(row)) for row in frame], text=False),
            cells.astype(np.int64),
            _as_digests(columns["row_digest"], native),
            _as_digests(columns["unit_digest"], native),
        )

    def rows(self, ids: Ids) -> int:
        """Rows in the union of finest cells ``ids``."""
        return int(self._rows[ids].sum())

    @property
    def box_codes(self) -> BoxCodes | None:
        """Each cell's value on each dimension and measure's NULL-ness, numbered, for the
        released sets' boxes (None: the table has no such column)."""
        with self._lock:
            if self._box_codes is None and self._codes:
                self._box_codes = BoxCodes.of(self._codes)
            return self._box_codes

    def row_counts(self) -> Ids:
        """Rows of every finest cell (read-only)."""
        view = self._rows.view()
        view.flags.writeable = False
        return view

    def query_sets(
        self, shape: QueryShape, spaces: Sequence[tuple[str, str | None, frozenset[int]]]
    ) -> list[SpaceCells]:
        """Per (space, filter column, aggregates): every cell of ``shape`` (all its grouping
        levels) with the finest cells of its query set. Empty query sets are left out.

        The finest cells of one data version never change, so the sets of one selection
        (its predicates, typed, its grouping and spaces) are computed once and shared,
        read-only: they name public dimension values and cell ids, nothing released."""
        key = _selection_key(shape, spaces)
        with self._lock:
            found = self._sets.get(key)
            if found is not None:
                self._sets.move_to_end(key)
                return found
        found = [self._space_cells(shape, *space, selection=key) for space in spaces]
        size = sum(ids.size for cells in found for ids in cells.cells.values())
        with self._lock:
            if size <= MAX_CACHED_IDS:
                self._sets[key] = found
                self._cached += size
                while self._cached > MAX_CACHED_IDS:
                    _, dropped = self._sets.popitem(last=False)
                    self._cached -= sum(ids.size for cells in dropped for ids in cells.cells.values())
        return found

    def _space_cells(
        self,
        shape: QueryShape,
        space: str,
        column: str | None,
        aggregates: frozenset[int],
        *,
        selection: Hashable,
    ) -> SpaceCells:
        keys = [k.lower() for k in shape.group_by]
        query = exp.select(exp.column(_ID, quoted=True), *[exp.column(k, quoted=True) for k in keys])
        nan_keys = [k for k in dict.fromkeys(keys) if k in self._nan_dimensions]
        for k in nan_keys:  # a frame reads NULL and NaN alike: NULL-ness told apart
            is_null = exp.Is(this=exp.column(k, quoted=True), expression=exp.Null())
            query = query.select(exp.alias_(is_null, _nan_flag(k), quoted=True))
        query = query.from_("finest")
        condition = _where(shape.predicates)
        if condition is not None:
            query = query.where(condition)
        present = self._present(column)
        if present is not None:
            query = query.where(present)
        with self._lock:
            result = self._con.execute(query.sql(dialect="duckdb"))
            # a query without groups needs the ids only: no data frame
            frame = result.df() if keys else None
            ids = np.asarray((result.fetchnumpy() if frame is None else frame)[_ID], dtype=np.int64)
        for k in nan_keys:
            assert frame is not None
            frame[k] = _nan_named(frame[k], frame[_nan_flag(k)].to_numpy(dtype=bool))
        cells: dict[CellKey, Ids] = {}
        for level in shape.levels:
            if not level:
                if ids.size:
                    ordered = ids.size < 2 or bool(np.all(ids[1:] > ids[:-1]))
                    cells[(level, ())] = read_only(ids if ordered else np.sort(ids))
                continue
            assert frame is not None
            columns = [k.lower() for k in level]
            groups = frame.groupby(columns, dropna=False, sort=False).indices
            for values, positions in groups.items():
                values = values if isinstance(values, tuple) else (values,)
                plain = (_plain(v, self._types.get(c, "")) for v, c in zip(values, columns, strict=True))
                key = (level, tuple(normalized(v) for v in plain))
                cells[key] = read_only(np.sort(ids[positions]))
        versioned = (self.data_version, selection, space, column)
        return SpaceCells(space, column, aggregates, MappingProxyType(cells), versioned)

    def close(self) -> None:
        self._con.close()

    def _present(self, column: str | None) -> exp.Expr | None:
        """The finest-table condition for rows where ``column`` is not NULL."""
        if column is None:
            return None
        name = column.lower()
        if name in self._measures:
            return exp.Not(this=exp.column(_null_flag(name), quoted=True))
        return exp.Not(this=exp.Is(this=exp.column(name, quoted=True), expression=exp.Null()))

    def _load(self, backend: Backend) -> None:
        dims = [exp.column(d, quoted=True) for d in self._dimensions]
        flags = [
            exp.alias_(
                exp.Is(this=exp.column(m, quoted=True), expression=exp.Null()), _null_flag(m), quoted=True
            )
            for m in self._measures
        ]
        keys: list[exp.Expr] = [*dims, *[exp.column(_null_flag(m), quoted=True) for m in self._measures]]
        projections: list[exp.Expr] = [
            *[d.copy() for d in dims],
            *flags,
            exp.alias_(exp.Count(this=exp.Star()), _ROWS, quoted=True),
        ]
        if not self._one_row_per_unit:
            units = exp.ArrayAgg(this=exp.Distinct(expressions=[exp.column("_uid", quoted=True)]))
            projections.append(exp.alias_(units, _UNITS, quoted=True))
        query = exp.select(*projections).from_(exp.to_table(self.table, quoted=True))
        if keys:
            query = query.group_by(*[k.copy() for k in keys]).order_by(
                *[exp.Ordered(this=k.copy(), nulls_first=True) for k in keys]
            )
        result = backend.execute(query)
        width = len(self._dimensions) + len(self._measures)
        self._rows = np.asarray([row[width] for row in result.rows], dtype=np.int64)
        self._unit_maps: list[BitMap] | None = None
        if not self._one_row_per_unit:
            self._unit_maps = [BitMap(row[width + 1] or []) for row in result.rows]
        frame = pd.DataFrame(
            {
                _ID: np.arange(len(result.rows), dtype=np.int64),
                **{
                    d: pd.Series([row[i] for row in result.rows], dtype=object)
                    for i, d in enumerate(self._dimensions)
                },
                **{
                    _null_flag(m): [bool(row[len(self._dimensions) + j]) for row in result.rows]
                    for j, m in enumerate(self._measures)
                },
            }
        )
        nans = {
            d: found
            for i, d in enumerate(self._dimensions)
            if (found := _nan_cells(result.rows, i, self._types.get(d, ""))) is not None
        }
        self._nan_dimensions = frozenset(nans)
        for d, found in nans.items():
            # an object column's NaN reaches DuckDB as NULL: the private table would merge
            # the NaN cells into the NULL ones (WHERE d IS NULL would select both), and
            # its cells would no longer be the engine's (the lineage check fails)
            values = frame[d].to_numpy(dtype=object, copy=True)
            values[found] = None
            frame[d], frame[_nan_flag(d)] = values, found
        # each cell's value per key column, numbered: the released sets' boxes (``boxes.py``;
        # NaN and NULL share a number, a coarser labelling, which makes fewer sets boxes)
        columns = [*self._dimensions, *(_null_flag(m) for m in self._measures)]
        self._codes = [pd.factorize(frame[c], use_na_sentinel=False)[0] for c in columns]
        casts = [f'"{_ID}"']
        for d in self._dimensions:
            cast = f'CAST("{d}" AS {self._types.get(d, "VARCHAR")})'
            if d in nans:
                cast = f"""CASE WHEN "{_nan_flag(d)}" THEN CAST('NaN' AS {self._types[d]}) ELSE {cast} END"""
            casts.append(f'{cast} AS "{d}"')
        casts += [f'"{_null_flag(m)}"' for m in self._measures]
        self._con.register("_cells", frame)
        try:
            self._con.execute(f"CREATE TABLE finest AS SELECT {', '.join(casts)} FROM _cells")
        finally:
            self._con.unregister("_cells")
