"""Exact ε bookkeeping: parsing ε, splitting it, and composing it within one query.

ε is kept as a ``fractions.Fraction`` everywhere a budget is added up, so ten charges of
0.1 spend exactly 1 and a budget of 1 is neither over- nor under-spent by rounding.
A float ε is read as the decimal it prints as (``0.1`` means 1/10, not the binary
0.1000000000000000055…), because that is the number the data steward wrote in the
policy; the samplers then use that same rational, so noise and ledger agree exactly.

Composition rules used by the guard (Dwork & Roth 2014, Thm 3.14 and §2.4 / McSherry 2009):

- **sequential**: releases that may all depend on one respondent cost the sum of their ε
  (each aggregate of a query: COUNT, SUM, ... over the same rows);
- **parallel**: releases on disjoint sets of privacy units cost the maximum of their ε
  (the cells of one GROUP BY). When one unit may reach several cells, the mechanisms
  fold that into the per-cell sensitivity (L1 = cells per unit · rows per cell), so the
  whole vector of cells is still ε-DP and "maximum over cells" stays correct.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from guard.policy.epsilon import EpsilonLike, as_epsilon

__all__ = ["QueryAccountant", "format_epsilon", "split_sequential"]


def format_epsilon(value: Fraction) -> str:
    """A short human form of an ε (6 significant digits), for notes and messages."""
    return f"{float(value):.6g}"


def split_sequential(total: EpsilonLike, weights: int | Sequence[int]) -> tuple[Fraction, ...]:
    """Split ``total`` ε over sequential releases, exactly.

    ``weights`` is either a count n (equal shares total/n) or positive integer weights
    w_i (share_i = total · w_i / Σw). The shares are exact rationals that add up to
    ``total`` with no remainder. Raises ``ValueError`` on an empty or non-positive split.
    """
    eps = as_epsilon(total, name="total epsilon")
    parts = [1] * weights if isinstance(weights, int) else list(weights)
    if not parts or any(w <= 0 for w in parts):
        raise ValueError(f"a split needs at least one positive weight, got {weights!r}")
    denominator = sum(parts)
    return tuple(eps * w / denominator for w in parts)


class QueryAccountant:
    """The ε one query spends: sequential across aggregates, parallel across cells.

    ``record(aggregate, epsilon)`` is called once per released cell. The query's cost is
    Σ over aggregates of (max over that aggregate's cells of ε). Not thread-safe: one
    accountant belongs to one query being answered.
    """

    def __init__(self) -> None:
        self._per_aggregate: dict[str, Fraction] = {}

    def record(self, aggregate: str, epsilon: EpsilonLike) -> None:
        """One cell of ``aggregate`` was released with ``epsilon`` (parallel with its siblings)."""
        eps = as_epsilon(epsilon)
        self._per_aggregate[aggregate] = max(self._per_aggregate.get(aggregate, Fraction(0)), eps)

    def by_aggregate(self) -> dict[str, Fraction]:
        """ε per aggregate (the maximum over its cells), in recording order."""
        return dict(self._per_aggregate)

    @property
    def total(self) -> Fraction:
        """The query's ε: the sum over aggregates; 0 when nothing noisy was released."""
        return sum(self._per_aggregate.values(), Fraction(0))
