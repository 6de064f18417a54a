"""A rule set: a tuple of configured rules, evaluated per cell and combined.

A cell is sensitive if any rule finds it so; its protection levels are the largest
any sensitive rule asks for, per direction. Rules are data (a tuple) so a policy can
list them; each is a pure function of one cell.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from guard.rules.contributions import CellContributions, RuleVerdict

__all__ = ["Rule", "RuleSet", "combine", "depth", "evaluate"]


class Rule(Protocol):
    """A configured sensitivity rule."""

    @property
    def name(self) -> str:
        """The rule and its parameters, e.g. ``"dominance(n=1, k=0.6)"``."""
        ...

    @property
    def depth(self) -> int:
        """How many of a cell's largest contributions the rule reads."""
        ...

    def __call__(self, cell: CellContributions) -> RuleVerdict: ...


RuleSet = tuple[Rule, ...]


def depth(rules: Sequence[Rule]) -> int:
    """How many largest contributions per cell the backend must compute for ``rules``."""
    return max((rule.depth for rule in rules), default=0)


def combine(verdicts: Iterable[RuleVerdict]) -> RuleVerdict:
    """Sensitive if any verdict is; protection = max per direction over sensitive ones.

    ``rule`` of the result names the rules that found the cell sensitive, joined by
    ``" + "``; it is empty when none did.
    """
    hits = [v for v in verdicts if v.sensitive]
    if not hits:
        return RuleVerdict("", False)
    return RuleVerdict(
        " + ".join(v.rule for v in hits),
        True,
        upper=max(v.upper for v in hits),
        lower=max(v.lower for v in hits),
    )


def evaluate(rules: Sequence[Rule], cell: CellContributions) -> RuleVerdict:
    """Apply every rule of ``rules`` to ``cell`` and :func:`combine` the verdicts.

    Raises:
        ValueError: a rule needs more top contributions than ``cell`` carries.
    """
    return combine(rule(cell) for rule in rules)
