"""Minimum frequency (threshold) rule: too few respondents in a cell.

Seed 002 §2.2.2: a cell is sensitive if its number of respondents is below a given
number. Frequency-count tables use this rule alone; magnitude tables add it to the
magnitude rules, because a cell of one or two respondents discloses to each of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from guard.rules.contributions import CellContributions, RuleVerdict

__all__ = ["MinimumFrequency", "minimum_frequency"]


def minimum_frequency(
    cell: CellContributions, threshold: int, fraction: float = 0.1, floor: float = 0.0
) -> RuleVerdict:
    """Threshold rule: sensitive iff ``0 < contributors < threshold`` (strict).

    A cell of exactly ``threshold`` contributors is safe; an empty cell is safe.

    Protection levels (both directions, in the measure's unit)::

        upper = lower = max(fraction * total, floor)

    ``fraction`` is the share of the cell value an attacker's interval must leave open
    on each side (0.1 = the cell must look anywhere in ±10 %); ``floor`` is an absolute
    minimum, useful for frequency tables where a level below 1 protects nothing (the
    attacker knows counts are integers). The suppression stage caps the lower level at
    the cell's distance to its lower bound.

    Raises:
        ValueError: ``threshold < 1``, ``fraction`` or ``floor`` negative, or both zero
            (a sensitive cell with zero protection could be recomputed from totals).
    """
    _check(threshold, fraction, floor)
    sensitive = 0 < cell.contributors < threshold
    name = f"threshold(t={threshold})"
    if not sensitive:
        return RuleVerdict(name, False)
    level = max(fraction * cell.total, floor)
    return RuleVerdict(name, True, upper=level, lower=level)


def _check(threshold: int, fraction: float, floor: float) -> None:
    if threshold < 1:
        raise ValueError(f"threshold must be >= 1, got {threshold}")
    if fraction < 0 or floor < 0:
        raise ValueError("threshold rule protection (fraction, floor) must be >= 0")
    if fraction == 0 and floor == 0:
        raise ValueError("threshold rule needs a positive protection fraction or floor")


@dataclass(frozen=True)
class MinimumFrequency:
    """The threshold rule as a configured object; see :func:`minimum_frequency`."""

    threshold: int
    fraction: float = 0.1
    floor: float = 0.0

    def __post_init__(self) -> None:
        _check(self.threshold, self.fraction, self.floor)

    @property
    def name(self) -> str:
        return f"threshold(t={self.threshold})"

    @property
    def depth(self) -> int:
        """How many of the largest contributions the rule reads: none."""
        return 0

    def __call__(self, cell: CellContributions) -> RuleVerdict:
        return minimum_frequency(cell, self.threshold, self.fraction, self.floor)
