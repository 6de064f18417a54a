"""Immutable, typed model of a policy. Built only by :mod:`guard.policy.load`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from fractions import Fraction
from pathlib import Path

from guard.engines import Engine
from guard.policy.credentials import ScramVerifier
from guard.policy.derivation import Derivation
from guard.rules import Rule

__all__ = [
    "Analyst",
    "Column",
    "Limits",
    "LinkScope",
    "NoiseMode",
    "NoiseSettings",
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
    #: a table inside the back-end's own engine (PostgreSQL, Spark), read in place
    TABLE = "table"


@dataclass(frozen=True)
class Source:
    """Where a protected table's rows come from.

    A file (CSV, Parquet, DuckDB) has a ``path``; ``table`` names the table inside a
    DuckDB file. A TABLE source has no path: ``table`` names it inside the back-end's
    engine (``schema.table`` allowed).
    """

    kind: SourceKind
    path: Path | None
    table: str | None = None

    @property
    def file(self) -> Path:
        """The source file; only for CSV, Parquet and DuckDB sources."""
        if self.path is None:
            raise ValueError(f"a {self.kind.value} source has no file")
        return self.path


@dataclass(frozen=True)
class BackendSettings:
    """Which engine runs the queries, and how to reach it (``backend:`` in the policy).

    ``options`` are the engine's own keys, checked by the loader (see policies/README.md):
    postgres: dsn (the read-only query role), owner_dsn (builds the snapshot), schema;
    spark: master or remote (Spark Connect URL), snapshot (folder). duckdb has none.
    """

    #: a name of :data:`guard.engines.ENGINES`
    engine: str = Engine.DUCKDB.value
    # left out of the hash (a dict is unhashable) but compared: policies are hashed
    options: Mapping[str, str] = field(default_factory=dict, hash=False)


#: a measure whose declared range is at most this wide (a 0/1 flag) is answered with noise
#: unless its policy says otherwise: exact sums of such a measure cannot survive many
#: overlapping questions (Dinur & Nissim 2003), and its bounds alone pin values
NARROW_MEASURE_RANGE = 1.0


@dataclass(frozen=True)
class Column:
    name: str
    role: Role
    #: declared [low, high] of a measure; contributions outside are clamped where the
    #: mechanism needs bounded sensitivity (noise, LP audits)
    bounds: tuple[float, float] | None = None
    description: str = ""
    #: a measure's own protection mode (``noise:`` on the column); None: the table's,
    #: except for a narrow measure (see :attr:`protection`)
    noise: NoiseMode | None = None
    #: how a derived dimension is computed (``derived:`` of the table); None: the
    #: column is read from the source
    derived: Derivation | None = None

    @property
    def narrow(self) -> bool:
        """A measure whose declared range is at most :data:`NARROW_MEASURE_RANGE` wide (and
        not empty: a constant measure states nothing the bounds do not)."""
        return self.bounds is not None and 0 < self.bounds[1] - self.bounds[0] <= NARROW_MEASURE_RANGE

    @property
    def protection(self) -> NoiseMode | None:
        """The measure's mode: as declared, else noise for a narrow measure, else None
        (the table's, the analyst's or the policy's mode applies)."""
        if self.noise is not None:
            return self.noise
        return NoiseMode.NOISE if self.role is Role.MEASURE and self.narrow else None


class NoiseMode(Enum):
    """How a table's answers are protected (policies/README.md, "noise")."""

    #: sensitivity rules and cell suppression on exact values (the default)
    OFF = "off"
    #: ε-differential privacy: noisy values, contribution bounding, budgets; no suppression
    NOISE = "noise"


@dataclass(frozen=True)
class NoiseSettings:
    """Noise mode's parameters: one ε per query, contribution bounds, the budgets."""

    #: the mode of every table and analyst that does not choose its own
    mode: NoiseMode = NoiseMode.OFF
    #: ε one query spends, split over its statistics and grouping levels
    epsilon_per_query: Fraction = Fraction(1)
    #: AVG as "ratio" (noisy centred sum / noisy count) or "clamped_mean" (seed 001's
    #: clamping-down mean with a noisy size)
    average: str = "ratio"
    #: L0 bound: GROUP BY cells (per grouping level) one privacy unit may reach
    cells_per_unit: int = 1
    #: L∞ bound: rows one privacy unit may contribute to one cell
    rows_per_cell: int = 1
    #: a GROUP BY row is shown only when its noisy count is at least this; None: the
    #: smallest threshold whose δ is at most ``delta``
    group_threshold: int | None = None
    #: δ target for the automatic group threshold
    delta: float = 1e-6
    #: ε every analyst may spend (analysts may declare their own ``budget``)
    analyst_budget: Fraction | None = None
    #: ε all analysts together may spend (collusion); None: the sum of analyst budgets
    global_budget: Fraction | None = None
    #: group name -> (ε budget, member analysts): analysts who share what they learn
    groups: tuple[tuple[str, Fraction, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Table:
    name: str
    source: Source
    privacy_unit: str
    columns: tuple[Column, ...]
    description: str = ""
    #: this table's noise mode; None: the policy's ``noise.mode``
    noise: NoiseMode | None = None

    def column(self, name: str) -> Column | None:
        """The declared column called ``name`` (case-insensitive), or None."""
        lowered = name.lower()
        for column in self.columns:
            if column.name.lower() == lowered:
                return column
        return None

    def names(self, role: Role | None = None) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if role is None or c.role is role)

    @property
    def stored(self) -> tuple[Column, ...]:
        """The columns read from the source: every declared one but the derived."""
        return tuple(c for c in self.columns if c.derived is None)

    @property
    def derived(self) -> tuple[Column, ...]:
        """The derived dimensions, computed from stored columns by the snapshot."""
        return tuple(c for c in self.columns if c.derived is not None)


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


class HistoryMode(Enum):
    """Whether answers are audited against what was released before (``guard.audit``)."""

    #: exact Audit Expert span audit of SUM / COUNT / AVG over every earlier release
    EXACT = "exact"
    #: no history control (each answer protected on its own, plus linked tables)
    OFF = "off"


@dataclass(frozen=True)
class HistorySettings:
    """Query-history control: see :mod:`guard.history.screen` and policies/README.md."""

    audit: HistoryMode = HistoryMode.EXACT
    #: groups of fewer than k privacy units must never become derivable; None: the
    #: protection's ``min_query_set_size``
    k: int | None = None
    #: overlap control: a new query set may share at most this many privacy units with
    #: any earlier released one (None: off)
    max_overlap: int | None = None
    #: partial disclosure: refuse when a group's feasible interval (LP over declared
    #: bounds) would narrow below this fraction of its a-priori range (None: off)
    tolerance: float | None = None
    #: administratively isolated analyst groups, each with its own audit state; every
    #: analyst in no group shares the one default state (collusion-safe)
    groups: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def scope_of(self, analyst: str) -> str:
        """The audit state an analyst's answers feed and are checked against."""
        for name, members in self.groups:
            if analyst in members:
                return f"group:{name}"
        return "all"


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
    history: HistorySettings = field(default_factory=HistorySettings)

    @property
    def history_k(self) -> int:
        return self.history.k if self.history.k is not None else self.min_query_set_size


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
    #: this analyst's noise mode, over the table's; None: the table's
    noise: NoiseMode | None = None
    #: ε this analyst may spend; None: the policy's ``noise.budgets.per_analyst``
    budget: Fraction | None = None
    #: SCRAM-SHA-256 verifier of the analyst's password (``credentials.py``); None: the
    #: analyst cannot log in to the endpoints (the library and CLI do not authenticate)
    password: ScramVerifier | None = None

    def may_query(self, table: str) -> bool:
        return self.tables is None or table.lower() in (t.lower() for t in self.tables)


@dataclass(frozen=True)
class Policy:
    name: str
    path: Path
    state_dir: Path
    backend: BackendSettings
    tables: tuple[Table, ...]
    protection: Protection
    limits: Limits
    analysts: tuple[Analyst, ...]
    noise: NoiseSettings = field(default_factory=NoiseSettings)

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

    def noise_mode(self, table: Table, analyst: Analyst, measures: Iterable[str] = ()) -> NoiseMode:
        """The mode an answer of ``table`` to ``analyst`` gets when it sums or averages
        ``measures``: the analyst's, else noise if one of those measures is protected by
        noise (:attr:`Column.protection`), else the table's, else the policy's."""
        if analyst.noise is not None:
            return analyst.noise
        wanted = {m.lower() for m in measures}
        for column in table.columns:
            if column.name.lower() in wanted and column.protection is NoiseMode.NOISE:
                return NoiseMode.NOISE
        return table.noise or self.noise.mode

    @property
    def uses_noise(self) -> bool:
        modes = {
            self.noise.mode,
            *(t.noise for t in self.tables),
            *(a.noise for a in self.analysts),
            *(c.protection for t in self.tables for c in t.columns),
        }
        return bool(modes - {None, NoiseMode.OFF})
