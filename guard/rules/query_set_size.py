"""Query-set-size control (Denning; Schlörer): k <= |QS| <= N - k, counted in privacy units.

A cell over fewer than k respondents discloses about them directly; a cell over more
than N - k discloses about the fewer than k respondents *outside* it, by subtraction
from the table total (the complement attack). A query set that is the whole population
has an empty complement, which isolates nobody: it is released unless the policy asks
for the strict textbook bound (``allow_full_population: false``).

The decision reads only the units count of each cell, a function of public dimension
values; it never looks at the aggregated values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from guard.rules.contributions import RuleVerdict


class Cell(Protocol):
    """What the control reads of a cell (:class:`guard.cells.Cell` has it): public sizes."""

    @property
    def value(self) -> Any: ...

    @property
    def units(self) -> int: ...

    @property
    def population(self) -> int: ...


__all__ = [
    "NAME",
    "SIZE_PROTECTION",
    "QuerySetSize",
    "SizeVerdict",
    "check_cell",
    "refusal_reason",
    "releasable",
]

NAME = "query-set-size"

#: share of a withheld cell's value its interval must leave open each way when this
#: control (not a configured rule) withheld it: like a threshold-rule cell, so a withheld
#: small cell can never be recomputed from totals released beside it
SIZE_PROTECTION = 0.1


@dataclass(frozen=True)
class QuerySetSize:
    """The control as a rule beside the sensitivity rules: a cell over fewer than ``k``
    units, or leaving fewer than ``k`` outside it, is sensitive."""

    k: int
    allow_full_population: bool = True

    @property
    def name(self) -> str:
        return f"{NAME}(k={self.k})"

    def __call__(self, cell: Cell, floor: float = 0.0) -> RuleVerdict | None:
        """The verdict on ``cell`` when it fails (None when it passes); ``floor`` is the
        smallest protection level (1 for counts)."""
        if releasable(cell.units, cell.population, self.k, self.allow_full_population):
            return None
        level = max(SIZE_PROTECTION * abs(float(cell.value or 0)), floor)
        return RuleVerdict(self.name, True, upper=level, lower=level)


@dataclass(frozen=True)
class SizeVerdict:
    released: bool
    too_small: bool = False


def releasable(units: int, population: int, k: int, allow_full_population: bool = True) -> bool:
    """k <= units, and at least k outside the cell (or nobody, when that is allowed)."""
    outside = population - units
    return units >= k and (outside >= k or (outside == 0 and allow_full_population))


def check_cell(cell: Cell, k: int, allow_full_population: bool = True) -> SizeVerdict:
    """Whether one cell passes; ``too_small`` tells which bound failed when it does not."""
    if releasable(cell.units, cell.population, k, allow_full_population):
        return SizeVerdict(True)
    return SizeVerdict(False, too_small=cell.units < k)


def refusal_reason(cell: Cell, k: int, allow_full_population: bool = True) -> str:
    """The message for a query whose only cell fails (says which bound, never the count)."""
    verdict = check_cell(cell, k, allow_full_population)
    if verdict.too_small:
        return (
            f"refused by the query-set-size control: the query set covers fewer than k={k} "
            "respondents; widen the WHERE conditions or group by fewer dimensions"
        )
    return (
        f"refused by the query-set-size control: the query set leaves fewer than k={k} "
        "respondents outside it (a complement query would isolate them); narrow the "
        "WHERE conditions"
    )
