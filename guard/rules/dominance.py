"""(n,k)-dominance: a few respondents make up most of a cell.

Seed 000 (Torra, after Castro 2012): with ``c_(1) ≥ c_(2) ≥ …`` the contributions
in descending order, the cell is sensitive when ``Σ_{i=1}^{n} c_(i) / Σ_i c_i > k``.
Seed 002 §2.4.6 states the same rule with k in percent; here k is a fraction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from guard.rules.contributions import CellContributions, RuleVerdict

__all__ = ["Dominance", "dominance"]


def dominance(cell: CellContributions, n: int, k: float) -> RuleVerdict:
    """(n,k)-dominance: sensitive iff ``Σ_{i=1}^{n} x_i > k * total`` (strict).

    ``x_1 ≥ x_2 ≥ …`` are the per-respondent magnitudes; a cell whose top ``n`` make up
    exactly the fraction ``k`` is safe. An all-zero cell is safe.

    Protection levels (tau-ARGUS, k as a fraction; symmetric by convention)::

        upper = lower = Σ_{i=1}^{n} x_i / k - total

    i.e. once an attacker's upper estimate of the cell reaches ``Σ top_n / k``, the top
    ``n`` no longer dominate that estimate.

    Raises:
        ValueError: ``n < 1`` or ``k`` outside ``(0, 1]``; the cell has more
            contributors than ``top`` holds and fewer than ``n`` were given.
    """
    _check(n, k)
    name = f"dominance(n={n}, k={k:g})"
    share = math.fsum(cell.largest(n))
    if not share > k * cell.total:
        return RuleVerdict(name, False)
    level = share / k - cell.total
    return RuleVerdict(name, True, upper=level, lower=level)


def _check(n: int, k: float) -> None:
    if n < 1:
        raise ValueError(f"dominance rule needs n >= 1, got {n}")
    if not 0 < k <= 1:
        raise ValueError(f"dominance rule needs k as a fraction in (0, 1], got {k}")


@dataclass(frozen=True)
class Dominance:
    """(n,k)-dominance as a configured object; see :func:`dominance`."""

    n: int
    k: float

    def __post_init__(self) -> None:
        _check(self.n, self.k)

    @property
    def name(self) -> str:
        return f"dominance(n={self.n}, k={self.k:g})"

    @property
    def depth(self) -> int:
        """How many of the largest contributions the rule reads."""
        return self.n

    def __call__(self, cell: CellContributions) -> RuleVerdict:
        return dominance(cell, self.n, self.k)
