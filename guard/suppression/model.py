"""Shared types of the suppression stage: protection requirements, options, results."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from guard.errors import QueryRefused
from guard.suppression.table import K, Key, Table

__all__ = [
    "UNVERIFIED_REFUSAL",
    "Block",
    "Levels",
    "Method",
    "Protection",
    "ProtectionInfeasible",
    "ProtectionLevels",
    "ProtectionUnverified",
    "SuppressionOptions",
    "SuppressionResult",
    "Weight",
    "level_blocks",
    "required_levels",
]


class ProtectionLevels(Protocol):
    """Anything with upper/lower protection levels, e.g. :class:`guard.rules.RuleVerdict`."""

    @property
    def upper(self) -> float: ...

    @property
    def lower(self) -> float: ...


@dataclass(frozen=True)
class Protection:
    """How far an attacker's feasibility interval for a sensitive cell must reach above
    (``upper``) and below (``lower``) its true value, in the cell's unit."""

    upper: float
    lower: float


#: per cell index: (upper level, lower level), capped at the cell's bounds
Levels = dict[int, tuple[float, float]]
#: one protection requirement: (cell index, level, upward)
Block = tuple[int, float, bool]


def level_blocks(levels: Levels) -> list[Block]:
    """Every positive level as ``(cell, level, upward)``: what a pattern must prove."""
    return [
        (p, level, upward)
        for p, lv in levels.items()
        for level, upward in zip(lv, (True, False), strict=True)
        if level > 0
    ]


def required_levels(table: Table, requirements: Mapping[K, ProtectionLevels]) -> Levels:
    """Protection levels by cell index, capped so they can be met at all.

    An interval can never reach past a cell's a-priori bounds, so the levels are capped:
    ``upper <= ub - a`` and ``lower <= a - lb``; a capped requirement is met when the
    attacker's interval reaches the bound itself.

    Raises:
        ValueError: a key is not a cell of ``table``, or a level is negative or NaN.
    """
    levels: Levels = {}
    for key, req in requirements.items():
        if key not in table:
            raise ValueError(f"sensitive cell {key!r} is not in the table")
        if not (req.upper >= 0 and req.lower >= 0):
            raise ValueError(f"protection levels of {key!r} must be >= 0")
        i = table.index(key)
        a, lb, ub = table.values[i], table.lower[i], table.upper[i]
        levels[i] = (min(req.upper, ub - a), min(req.lower, a - lb))
    return levels


class Weight(Enum):
    """Information loss of withholding a cell (the MILP's cost ``w_i``)."""

    #: every withheld cell costs 1: fewest suppressions
    COUNT = "count"
    #: a cell costs its absolute value: least withheld mass (tau-ARGUS default)
    VALUE = "value"


class Method(Enum):
    """How the complementary cells were chosen."""

    #: the classic CSP MILP (seed 000), solved by HiGHS
    OPTIMAL = "optimal"
    #: one cheapest-deviation LP per sensitive cell and direction, then audit and repair
    HEURISTIC = "heuristic"


@dataclass(frozen=True)
class SuppressionOptions:
    """Settings of :func:`guard.suppression.suppress`.

    Attributes:
        weight: information-loss weight of a withheld cell.
        method: force a method; None chooses OPTIMAL when
            ``cells * sensitive cells <= optimal_limit``, else HEURISTIC.
        optimal_limit: size threshold (cells times sensitive cells) for the MILP.
        time_limit: seconds the MILP may run; past it, the best pattern found is
            compared with the heuristic's and the cheaper kept.
        perturbation: costs are multiplied by ``1 + perturbation * u_i`` with
            ``u_i ~ U[0, 1)`` from a secret seed, so the pattern is not a function of
            the table alone (seed 004's matching attack). 0 makes the choice
            deterministic: for tests and attack demonstrations only.
        repair_rounds: audit-and-repair passes after the main method, to absorb
            solver tolerances; a pattern still failing after them raises.
        reuse_distant: each heuristic LP may route through every cell withheld so
            far, not only those sharing a relation with its neighbourhood: markedly
            fewer suppressions on n-D tables (about 30 % on a 10 000-cell 3-D table),
            at much larger LPs (there 90 s instead of 5 s); no difference on 2-D
            tables. None (default): only for tables of at most ``distant_limit`` cells.
        distant_limit: table size (cells) up to which ``reuse_distant=None`` reuses
            every withheld cell.
        cut_limit: size (cells times sensitive cells) up to which a pattern not
            proven optimal is improved by the capacity-cut MILP
            (:mod:`~guard.suppression.cuts`), started from it, for a budget of
            simplex iterations (about ``time_limit`` seconds on a quiet machine; a count
            of work, so the pattern does not depend on the load).
        starts: heuristic patterns (on secretly jittered costs) recombined by the
            MILP (:mod:`~guard.suppression.recombination`) before the cut loop, for
            patterns not proven optimal up to ``recombine_limit`` cells times
            sensitive cells, on tables where some cell lies in three relations
            (:func:`~guard.suppression.recombination.crossed`); 1 (or
            ``method=HEURISTIC``) skips this.
        recombine_limit: see ``starts`` (5 000: 3-D tables up to about 6 x 6 x 6 with
            all margins; above, one recombination's MILP takes tens of seconds).
        nodes: branch-and-bound nodes of that MILP (a limit on work, not time, so the
            pattern does not depend on the machine's load; ``time_limit`` is its
            fail-safe).
        moves: local-search moves (publish one complementary cell, repair, prune:
            :mod:`~guard.suppression.localsearch`) on a pattern not proven optimal, on
            tables where some cell lies in three relations; at most 80 000 / cells of
            them (a move's LPs grow with the table). 0 skips it.
    """

    weight: Weight = Weight.VALUE
    method: Method | None = None
    optimal_limit: int = 5_000
    time_limit: float = 5.0
    perturbation: float = 0.5
    repair_rounds: int = 3
    reuse_distant: bool | None = None
    distant_limit: int = 5_000
    cut_limit: int = 200_000
    starts: int = 8
    recombine_limit: int = 5_000
    nodes: int = 100
    moves: int = 100

    def reuses_distant(self, cells: int) -> bool:
        """Whether the heuristic reuses every withheld cell for a table of ``cells``."""
        return self.reuse_distant if self.reuse_distant is not None else cells <= self.distant_limit

    def __post_init__(self) -> None:
        if self.perturbation < 0:
            raise ValueError("perturbation must be >= 0")
        if self.time_limit <= 0:
            raise ValueError("time_limit must be > 0 seconds")
        if self.starts < 1 or self.nodes < 1:
            raise ValueError("starts and nodes must be >= 1")
        if self.moves < 0:
            raise ValueError("moves must be >= 0")


@dataclass(frozen=True)
class SuppressionResult:
    """The cells to withhold.

    Attributes:
        primary: the sensitive cells (and any cells the caller forced).
        secondary: complementary cells withheld to protect them.
        method: the method that produced the pattern (HEURISTIC also when the MILP
            found nothing in time and the heuristic took over).
        optimal: the MILP proved the pattern optimal for the perturbed costs.
        cost: information loss ``Σ w_i`` over all withheld cells (unperturbed weights).
        repaired: cells added by the audit-and-repair passes.
        proofs: the verified attacker deviations (cell -> move) that prove the pattern,
            each moving withheld cells only; a later problem over the same cells may
            adopt them (``suppress(prior=...)``), after checking them again. Internal:
            they hold hidden values' room, never show them.
    """

    primary: frozenset[Key]
    secondary: frozenset[Key]
    method: Method
    optimal: bool
    cost: float
    repaired: int = 0
    proofs: tuple[Mapping[Key, float], ...] = field(default=(), compare=False, repr=False)

    @property
    def suppressed(self) -> frozenset[Key]:
        return self.primary | self.secondary


class ProtectionInfeasible(QueryRefused):
    """No pattern of withheld cells gives a sensitive cell its protection levels (the
    bounds or the cells that must stay published leave too little room)."""


#: what an analyst is told when a ``ProtectionUnverified`` refuses an answer
UNVERIFIED_REFUSAL = (
    "refused by secondary cell suppression: the check that every single contributor's cells "
    "stay protected did not finish within its budget, and an answer it has not verified is not "
    "released; ask for fewer cells, coarser groups or fewer totals"
)


class ProtectionUnverified(ProtectionInfeasible):
    """A check a pattern needs did not finish within its budget: the pattern is not
    returned (fail closed), though nothing shows it would disclose. Callers that say
    why an answer is refused tell it apart from a proven infeasibility."""
