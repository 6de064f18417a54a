"""The interface every data engine implements. Engines differ by declared capabilities."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlglot import ErrorLevel, exp

__all__ = ["Backend", "Capabilities", "KeyedHash", "ResultSet", "TableInfo", "TopN", "plain_value"]


class TopN(Enum):
    """How the engine computes a cell's n largest per-unit contributions, exactly."""

    #: DuckDB's top-n aggregate max(x, n): one pass, a descending list per group
    NATIVE = "native"
    #: rank the per-unit contributions with row_number() over the cell, then keep rank
    #: <= n with one MAX(CASE ...) per rank (standard SQL: PostgreSQL, Spark)
    WINDOW = "window"
    #: two passes: the cell query also takes per cell a lower bound of the n-th
    #: largest contribution (the smallest of n bucket MAXima), then the contributions
    #: are joined with it and only those reaching it ranked as in WINDOW; over the
    #: table's rows when each unit has one row (no per-unit GROUP BY, no sort of all
    #: of them). Standard SQL: PostgreSQL, Spark (guard/query/topn.py)
    MAX_JOIN = "max_join"


class KeyedHash(Enum):
    """The engine's deterministic hash of several values (noise mode's cell choice)."""

    #: DuckDB hash(a, b, ...)
    VARIADIC = "hash"
    #: Spark xxhash64(a, b, ...)
    XXHASH64 = "xxhash64"
    #: PostgreSQL hashtextextended(concat_ws('|', a, b, ...), 0)
    TEXT = "hashtextextended"


@dataclass(frozen=True)
class Capabilities:
    """What the guard may ask of an engine; query generation reads these flags, never
    the engine's name."""

    #: the engine's SQL dialect, as sqlglot names it
    dialect: str
    #: COUNT(...) FILTER (WHERE ...) is available
    filtered_aggregates: bool = True
    #: how top-n contributions are computed
    top_n: TopN = TopN.WINDOW
    #: list functions (flatten, list_sort, list_slice) can merge top-n lists of detail
    #: cells into their totals (DuckDB); otherwise totals are ranked like detail cells
    list_merge: bool = False
    #: the deterministic hash used to pick a unit's kept cells in noise mode
    keyed_hash: KeyedHash = KeyedHash.VARIADIC
    #: ARRAY_AGG(x ORDER BY y) keeps the order (Spark's collect_list has no ORDER BY,
    #: and sqlglot drops it silently, so the flag must say so)
    ordered_aggregates: bool = True
    #: GROUPING() takes one key only (Spark; its grouping_id() must name every GROUP BY
    #: key, _uid included): the bitmask is spelled sum_i GROUPING(k_i) * 2^(n-1-i),
    #: the same bits as GROUPING(k1, ..., kn)
    single_key_grouping: bool = False


#: DuckDB's capabilities; also what query generation assumes when given none
DUCKDB_CAPABILITIES = Capabilities(
    dialect="duckdb",
    filtered_aggregates=True,
    top_n=TopN.NATIVE,
    list_merge=True,
    keyed_hash=KeyedHash.VARIADIC,
)


@dataclass(frozen=True)
class TableInfo:
    """Public facts about one protected table, fixed for one data version."""

    name: str
    #: lower-cased column name -> engine type name (declared dimensions and measures only)
    types: Mapping[str, str]
    rows: int
    #: distinct privacy units in the table
    units: int
    #: lower-cased column name -> distinct privacy units with a non-NULL value there
    units_with_value: Mapping[str, int] = field(default_factory=dict)
    #: every privacy unit has exactly one row, so counting rows counts units
    one_row_per_unit: bool = False
    #: fingerprint of the source data and the table's declaration
    data_version: str = ""

    @classmethod
    def from_document(cls, name: str, data: Mapping[str, Any]) -> TableInfo:
        """The facts as a snapshot's ``_guard_tables`` keeps them (a JSON document)."""
        return cls(
            name=name,
            types=data["types"],
            rows=data["rows"],
            units=data["units"],
            units_with_value=data["units_with_value"],
            one_row_per_unit=data["one_row_per_unit"],
            data_version=data["data_version"],
        )

    def population(self, column: str | None) -> int:
        """N for the complement rule: units in the table (with a value in ``column``)."""
        if column is None:
            return self.units
        return self.units_with_value.get(column.lower(), self.units)


@dataclass(frozen=True)
class ResultSet:
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]


class Backend(ABC):
    """A read-only engine holding the protected tables.

    Each protected table carries two guard columns besides the declared ones: ``_rid``,
    an immutable surrogate row id, and ``_uid``, an integer id of the privacy unit.
    Identifier columns are never loaded.
    """

    capabilities: Capabilities

    @abstractmethod
    def table_info(self, table: str) -> TableInfo: ...

    @abstractmethod
    def execute(self, query: exp.Expr) -> ResultSet:
        """Run one guard-generated query; values come back as plain Python numbers."""

    @abstractmethod
    def close(self) -> None: ...

    def execute_columns(self, query: exp.Expr) -> dict[str, npt.NDArray[Any]]:
        """Run one guard-generated query whose result is large; one array per column
        (engines that can hand over columns directly override this)."""
        result = self.execute(query)
        return {name: np.asarray([row[i] for row in result.rows]) for i, name in enumerate(result.columns)}

    def sql(self, query: exp.Expr) -> str:
        """The query in the engine's dialect; anything the dialect cannot express raises
        (sqlglot's RAISE level) instead of being approximated."""
        return query.sql(dialect=self.capabilities.dialect, unsupported_level=ErrorLevel.RAISE)


def plain_value(value: Any) -> Any:
    """Engine numbers (DECIMAL, HUGEINT) as plain int/float, so results serialize cleanly."""
    if isinstance(value, Decimal):
        # a DECIMAL with a scale stays fractional even when a value happens to be whole,
        # so one column never mixes int and float
        exponent = value.as_tuple().exponent
        return int(value) if isinstance(exponent, int) and exponent >= 0 else float(value)
    return value


def plain_rows(rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    # most rows hold no DECIMAL: find those that do in C (map, ``in``), convert only them
    return [tuple(plain_value(v) for v in row) if Decimal in map(type, row) else tuple(row) for row in rows]
