"""The p% and pq (prior/posterior) rules, with a coalition of c respondents.

Seed 002 §2.4.4-2.4.5: with ``x_1 ≥ x_2 ≥ … ≥ x_N`` the respondents' values and ``c``
the size of a coalition of respondents who pool what they know to estimate ``x_1``,
a cell is *protected* iff

    p%:  Σ_{i=c+2}^{N} x_i ≥ (p/100) · x_1
    pq:  (q/100) · Σ_{i=c+2}^{N} x_i ≥ (p/100) · x_1

The worst coalition against ``x_1`` is the ``c`` next largest respondents
``x_2 … x_{c+1}``; the rest is ``R = total - x_1 - Σ_{i=2}^{c+1} x_i``. ``q`` is how
well (in percent of each value) anyone can estimate a contribution *before* the table
is published; ``q = 100`` (no prior knowledge) is the p% rule, and with ``c = 1`` the
pq rule is the p% rule with the factor ``p/q``: sensitive iff ``R < (p/q) · x_1``.
Seed 000 states the same: p% is the pq rule with q = 100.

Protection level, derived from the attacker model: after publication the coalition
estimates ``x_1 ≤ T - Σ_{coalition} - (1 - q/100) · R``, an error of ``(q/100) · R``.
If the cell is withheld and the attacker's interval for it only reaches ``T + U``, the
error becomes ``U + (q/100) · R``, which must reach ``(p/100) · x_1``::

    upper = lower = (p/100) · x_1 - (q/100) · R        (symmetric by convention)

For ``q = 100, c = 1`` this is tau-ARGUS's p% level ``(p/100) x_1 - (T - x_1 - x_2)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from guard.rules.contributions import CellContributions, RuleVerdict

__all__ = ["PPercent", "PriorPosterior", "p_percent", "prior_posterior"]


def prior_posterior(cell: CellContributions, p: float, q: float, coalition: int = 1) -> RuleVerdict:
    """pq rule: sensitive iff ``(q/100) · R < (p/100) · x_1`` (strict), where
    ``R = total - x_1 - Σ_{i=2}^{c+1} x_i`` and ``c = coalition``.

    A cell with ``(q/100) · R`` exactly equal to ``(p/100) · x_1`` is safe; an all-zero
    cell is safe. Missing contributions (fewer respondents than ``c + 1``) count as 0,
    so a cell of at most ``c + 1`` respondents with ``x_1 > 0`` is always sensitive.
    The comparison is made as ``q · R < p · x_1`` so integer data decide exactly.

    Protection levels (measure unit): ``upper = lower = (p · x_1 - q · R) / 100``.

    Raises:
        ValueError: not ``0 < p < q ≤ 100``, ``coalition < 0``, or fewer than
            ``coalition + 1`` top contributions were given for a larger cell.
    """
    _check(p, q, coalition)
    return _evaluate(cell, p, q, coalition, _name(p, q, coalition))


def p_percent(cell: CellContributions, p: float, coalition: int = 1) -> RuleVerdict:
    """p% rule: sensitive iff ``total - x_1 - Σ_{i=2}^{c+1} x_i < (p/100) · x_1``
    (strict); with the default ``c = 1``: ``total - x_1 - x_2 < (p/100) · x_1``.

    Protection levels: ``upper = lower = (p/100) · x_1 - (total - x_1 - Σ_{i=2}^{c+1} x_i)``.
    This is :func:`prior_posterior` with ``q = 100``.

    Raises:
        ValueError: not ``0 < p < 100``, ``coalition < 0``, or too few top contributions.
    """
    _check(p, 100.0, coalition)
    return _evaluate(cell, p, 100.0, coalition, _name(p, None, coalition))


def _evaluate(cell: CellContributions, p: float, q: float, coalition: int, name: str) -> RuleVerdict:
    top = cell.largest(coalition + 1)
    x1 = top[0]
    rest = cell.total - math.fsum(top)
    # clamp float noise: the top never exceed the total (checked on construction)
    rest = max(rest, 0.0)
    if not q * rest < p * x1:
        return RuleVerdict(name, False)
    level = (p * x1 - q * rest) / 100.0
    return RuleVerdict(name, True, upper=level, lower=level)


def _name(p: float, q: float | None, coalition: int) -> str:
    c = "" if coalition == 1 else f", c={coalition}"
    if q is None:
        return f"p%(p={p:g}{c})"
    return f"pq(p={p:g}, q={q:g}{c})"


def _check(p: float, q: float, coalition: int) -> None:
    if not 0 < p < q <= 100:
        raise ValueError(f"p% / pq rules need 0 < p < q <= 100 (percent), got p={p:g}, q={q:g}")
    if coalition < 0:
        raise ValueError(f"coalition size must be >= 0, got {coalition}")


@dataclass(frozen=True)
class PPercent:
    """The p% rule as a configured object; see :func:`p_percent`."""

    p: float
    coalition: int = 1

    def __post_init__(self) -> None:
        _check(self.p, 100.0, self.coalition)

    @property
    def name(self) -> str:
        return _name(self.p, None, self.coalition)

    @property
    def depth(self) -> int:
        """How many of the largest contributions the rule reads: ``c + 1``."""
        return self.coalition + 1

    def __call__(self, cell: CellContributions) -> RuleVerdict:
        return p_percent(cell, self.p, self.coalition)


@dataclass(frozen=True)
class PriorPosterior:
    """The pq rule as a configured object; see :func:`prior_posterior`."""

    p: float
    q: float
    coalition: int = 1

    def __post_init__(self) -> None:
        _check(self.p, self.q, self.coalition)

    @property
    def name(self) -> str:
        return _name(self.p, self.q, self.coalition)

    @property
    def depth(self) -> int:
        """How many of the largest contributions the rule reads: ``c + 1``."""
        return self.coalition + 1

    def __call__(self, cell: CellContributions) -> RuleVerdict:
        return prior_posterior(cell, self.p, self.q, self.coalition)
