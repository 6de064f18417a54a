"""What a sensitivity rule sees of one cell, and what it says back.

Zero and negative contributions
-------------------------------
The magnitude rules (dominance, p%, pq) are defined for non-negative contributions
(seed 002 §2.4.1: magnitude data are non-negative quantities). The guard's policy is:

* **Negative contributions: the rules are applied to absolute values.** A respondent's
  exposure depends on the size of what they contributed, not on its sign, and with
  mixed signs the published sum no longer bounds any single contribution. So
  ``top`` holds the largest per-respondent ``|x_i|`` and ``total`` is ``Σ |x_i|`` (the
  cell's *magnitude*; for non-negative data it is the cell value). Build the input with
  :meth:`CellContributions.from_values`, which applies this; constructing it directly
  with a negative ``top`` entry raises, so signed values cannot slip through unnoticed.
  Protection levels come out in the measure's unit, computed on magnitudes.
* **Zero contributions:** a respondent contributing exactly 0 still counts in
  ``contributors`` (they are in the cell, which is what the threshold rule counts) and
  adds nothing to the magnitudes. A cell whose contributions are all zero is never
  sensitive under a magnitude rule: every formula reads ``0 > 0`` or ``0 < 0``.
* **Empty cells** (``contributors == 0``) are never sensitive: there is nobody to
  disclose, and the threshold rule is ``0 < contributors < t``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["CellContributions", "RuleVerdict"]


@dataclass(frozen=True)
class CellContributions:
    """The per-respondent view of one cell, as the rules need it.

    Attributes:
        total: ``Σ |x_i|`` over the cell's respondents, in the measure's unit (the cell
            value when contributions are non-negative).
        contributors: number of distinct respondents in the cell (contributions are
            already summed per respondent).
        top: the largest per-respondent magnitudes ``|x_i|``, in descending order; as
            many as the rules need (n for (n,k), 2 for p%, c+1 for pq with coalition c),
            fewer only when the cell has fewer contributors.

    Raises:
        ValueError: a field is not finite, ``contributors`` is negative, ``top`` has
            more entries than contributors, is not descending, holds a negative value,
            or sums to more than ``total`` (which means signed values were passed).
    """

    total: float
    contributors: int
    top: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not math.isfinite(self.total):
            raise ValueError(f"cell total must be finite, got {self.total!r}")
        if self.contributors < 0:
            raise ValueError(f"contributors must be >= 0, got {self.contributors}")
        if len(self.top) > self.contributors:
            raise ValueError(
                f"top has {len(self.top)} contributions but the cell has only {self.contributors} "
                "contributors; pass at most one per respondent"
            )
        if any(not math.isfinite(x) for x in self.top):
            raise ValueError("top contributions must be finite")
        if any(x < 0 for x in self.top):
            raise ValueError(
                "top contributions must be magnitudes (>= 0); build the cell with "
                "CellContributions.from_values, which applies the absolute-value policy"
            )
        if any(a < b for a, b in zip(self.top, self.top[1:], strict=False)):
            raise ValueError("top contributions must be in descending order")
        slack = 1e-9 * max(1.0, abs(self.total))
        if sum(self.top) > self.total + slack:
            raise ValueError(
                "top contributions sum to more than the cell total; total must be the sum of "
                "magnitudes Σ|x_i| (use CellContributions.from_values)"
            )

    @classmethod
    def from_values(cls, values: Iterable[float], depth: int | None = None) -> CellContributions:
        """Build a cell from its per-respondent contributions (one value per respondent).

        Applies the absolute-value policy of this module: ``total = Σ |x_i|`` and ``top``
        the ``depth`` largest ``|x_i|`` (all of them when ``depth`` is None).

        Raises:
            ValueError: ``depth`` is negative, or a value is not finite.
        """
        if depth is not None and depth < 0:
            raise ValueError(f"depth must be >= 0, got {depth}")
        magnitudes = sorted((abs(float(v)) for v in values), reverse=True)
        top = magnitudes if depth is None else magnitudes[:depth]
        return cls(total=math.fsum(magnitudes), contributors=len(magnitudes), top=tuple(top))

    def largest(self, count: int) -> tuple[float, ...]:
        """The ``count`` largest magnitudes, padded with zeros past the last contributor.

        Raises:
            ValueError: the cell has more contributors than ``top`` holds and ``count``
                exceeds ``len(top)``: a rule asked for more than was computed.
        """
        if count <= len(self.top):
            return self.top[:count]
        if self.contributors > len(self.top):
            raise ValueError(
                f"a rule needs the {count} largest contributions but only {len(self.top)} were "
                f"given for a cell of {self.contributors} contributors; compute top-{count}"
            )
        return self.top + (0.0,) * (count - len(self.top))


@dataclass(frozen=True)
class RuleVerdict:
    """A rule's decision on one cell.

    Attributes:
        rule: the rule's name with its parameters, e.g. ``"p%(p=10)"``; for a combined
            verdict, the names of the rules that found the cell sensitive, joined by
            ``" + "`` (empty when none did).
        sensitive: the cell must not be released (primary suppression).
        upper: upper protection level: how far above the true value an attacker's
            feasibility interval for the cell must reach, in the measure's unit.
        lower: lower protection level: how far below the true value it must reach.
            Both are 0 when the cell is not sensitive.
    """

    rule: str
    sensitive: bool
    upper: float = 0.0
    lower: float = 0.0
