"""What the noise cache holds: one released draw per statistic of a cell.

The cache key is built in ``release`` from the statistic, what bounds it and the cell's
canonical selection (``selection``), never from the SQL text and never from the set of
rows the cell happens to cover (see ``selection`` for why). The state store persists
the draws with the log row of the answer that released them.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

__all__ = ["Draw", "fraction_from_text", "fraction_text"]


@dataclass(frozen=True)
class Draw:
    """One released noisy statistic of one cell."""

    value: float
    #: noise scale in the statistic's unit
    scale: Fraction
    #: ε of the group it was drawn in
    epsilon: Fraction
    mechanism: str


def fraction_text(value: Fraction) -> str:
    """``value`` exactly, as "num/den" (or "num")."""
    return str(value)


def fraction_from_text(text: str) -> Fraction:
    """Inverse of :func:`fraction_text`."""
    return Fraction(text)
