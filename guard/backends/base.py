"""The interface every data engine implements. Engines differ by declared capabilities."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from sqlglot import exp

__all__ = ["Backend", "Capabilities", "ResultSet", "TableInfo", "plain_value"]


@dataclass(frozen=True)
class Capabilities:
    #: the engine's SQL dialect, as sqlglot names it
    dialect: str
    #: COUNT(DISTINCT x) FILTER (WHERE ...) is available
    filtered_aggregates: bool = True


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

    def sql(self, query: exp.Expr) -> str:
        return query.sql(dialect=self.capabilities.dialect)


def plain_value(value: Any) -> Any:
    """Engine numbers (DECIMAL, HUGEINT) as plain int/float, so results serialize cleanly."""
    if isinstance(value, Decimal):
        # a DECIMAL with a scale stays fractional even when a value happens to be whole,
        # so one column never mixes int and float
        exponent = value.as_tuple().exponent
        return int(value) if isinstance(exponent, int) and exponent >= 0 else float(value)
    return value


def plain_rows(rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [tuple(plain_value(v) for v in row) for row in rows]
