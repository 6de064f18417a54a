"""ε as the policy states it: an exact positive rational.

A float ε is read as the decimal it prints as (``0.1`` means 1/10, not the binary
0.1000000000000000055…), because that is the number the data steward wrote; the noise
samplers and the ledger then use that same rational, so noise and budgets agree exactly.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TypeAlias

__all__ = ["EpsilonLike", "as_epsilon"]

#: what callers may pass as an ε or a budget; strings are decimals from policy files
EpsilonLike: TypeAlias = Fraction | int | float | str


def as_epsilon(value: EpsilonLike, *, name: str = "epsilon") -> Fraction:
    """``value`` as an exact positive rational.

    Floats are read through their shortest decimal repr (``0.1`` → 1/10). Raises
    ``ValueError`` if the value is not finite and > 0, ``TypeError`` for other types
    (``bool`` included: ``True`` is never a meaningful ε).
    """
    if isinstance(value, Fraction) and value > 0:
        return value  # the common case inside the mechanisms: already parsed
    if isinstance(value, bool) or not isinstance(value, Fraction | int | float | str):
        raise TypeError(f"{name} must be a number or a decimal string, not {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    try:
        exact = Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
    except ValueError:
        raise ValueError(f"{name} must be a decimal number, got {value!r}") from None
    if exact <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return exact
