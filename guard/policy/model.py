"""Immutable, typed model of a policy. Built only by :mod:`guard.policy.load`."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from guard.rules import Rule

__all__ = [
    "Analyst",
    "Column",
    "Limits",
    "LinkScope",
    "Policy",
    "Protection",
    "Role",
    "Source",
    "SourceKind",
    "SuppressionSettings",
    "Table",
]


class Role(Enum):
    """What an analyst may do with a column."""

    #: identifies a respondent (or is the privacy unit): never usable in a query
    IDENTIFIER = "identifier"
    #: public classification: may be grouped by and filtered on
    DIMENSION = "dimension"
    #: confidential magnitude: may only appear inside an aggregate
    MEASURE = "measure"


class SourceKind(Enum):
    CSV = "csv"
    PARQUET = "parquet"
    DUCKDB = "duckdb"


@dataclass(frozen=True)
class Source:
    """Where a protected table's rows come from. ``table`` is only used for DuckDB files."""

    kind: SourceKind
    path: Path
    table: str | None = None


@dataclass(frozen=True)
class Column:
    name: str
    role: Role
    #: declared [low, high] of a measure; contributions outside are clamped where the
    #: mechanism needs bounded sensitivity (noise, LP audits)
    bounds: tuple[float, float] | None = None
    description: str = ""


@dataclass(frozen=True)
class Table:
    name: str
    source: Source
    privacy_unit: str
    columns: tuple[Column, ...]
    description: str = ""

    def column(self, name: str) -> Column | None:
        """The declared column called ``name`` (case-insensitive), or None."""
        lowered = name.lower()
        for column in self.columns:
            if column.name.lower() == lowered:
                return column
        return None

    def names(self, role: Role | None = None) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if role is None or c.role is role)


class LinkScope(Enum):
    """Whose earlier releases a new table is protected together with (linked tables)."""

    #: every analyst's releases: cells published to anyone are known (collusion-safe)
    ALL = "all"
    #: the same analyst's releases only
    ANALYST = "analyst"
    #: each answer on its own (only for policies whose analysts never share answers)
    NONE = "none"


@dataclass(frozen=True)
class SuppressionSettings:
    """Secondary cell suppression: see :mod:`guard.suppression` and policies/README.md."""

    #: information loss of a withheld cell: "value" (its magnitude) or "count" (1)
    weight: str = "value"
    #: "auto" (optimal MILP for small tables, heuristic above ``optimal_limit``),
    #: "optimal" or "heuristic"
    method: str = "auto"
    #: cells x sensitive cells up to which "auto" runs the MILP
    optimal_limit: int = 5_000
    #: seconds the MILP may run before the heuristic's pattern competes (online: short)
    time_limit: float = 2.0
    linked: LinkScope = LinkScope.ALL
    #: tables (cells) up to which every pattern is re-checked by an independent LP audit
    #: besides its certificates (two LPs per sensitive cell: ~10 s at 100 x 100)
    audit_limit: int = 2_500


@dataclass(frozen=True)
class Protection:
    #: k: every released cell must cover at least k privacy units, and leave at least k
    #: outside it (the complement attack)
    min_query_set_size: int = 3
    #: release a cell whose query set is the whole table (its complement is empty, so
    #: it isolates nobody); false gives the strict textbook bound |QS| <= N - k
    allow_full_population: bool = True
    #: sensitivity rules applied to every released cell (empty: query-set-size only)
    rules: tuple[Rule, ...] = ()
    suppression: SuppressionSettings = field(default_factory=SuppressionSettings)


@dataclass(frozen=True)
class Limits:
    """Size limits on what an analyst may send; they bound the parser's and planner's work."""

    max_sql_length: int = 20_000
    max_syntax_nodes: int = 2_000
    max_in_values: int = 1_000


@dataclass(frozen=True)
class Analyst:
    name: str
    #: tables this analyst may query; None means every table of the policy
    tables: tuple[str, ...] | None = None
    description: str = ""

    def may_query(self, table: str) -> bool:
        return self.tables is None or table.lower() in (t.lower() for t in self.tables)


@dataclass(frozen=True)
class Policy:
    name: str
    path: Path
    state_dir: Path
    backend: str
    tables: tuple[Table, ...]
    protection: Protection
    limits: Limits
    analysts: tuple[Analyst, ...]

    def table(self, name: str) -> Table | None:
        lowered = name.lower()
        for table in self.tables:
            if table.name.lower() == lowered:
                return table
        return None

    def analyst(self, name: str) -> Analyst | None:
        for analyst in self.analysts:
            if analyst.name == name:
                return analyst
        return None
