"""Sensitivity rules: which cells of a table must not be released (primary suppression),
and how much uncertainty each needs (protection levels for secondary suppression).

Each rule is a pure function of one cell's :class:`CellContributions`, also available
as a frozen, configured rule object; a rule set is a tuple of those objects.
"""

from guard.rules.contributions import CellContributions, RuleVerdict
from guard.rules.dominance import Dominance, dominance
from guard.rules.percent import PPercent, PriorPosterior, p_percent, prior_posterior
from guard.rules.query_set_size import QuerySetSize
from guard.rules.ruleset import Rule, RuleSet, combine, depth, evaluate
from guard.rules.threshold import MinimumFrequency, minimum_frequency

__all__ = [
    "CellContributions",
    "Dominance",
    "MinimumFrequency",
    "PPercent",
    "PriorPosterior",
    "QuerySetSize",
    "Rule",
    "RuleSet",
    "RuleVerdict",
    "combine",
    "depth",
    "dominance",
    "evaluate",
    "minimum_frequency",
    "p_percent",
    "prior_posterior",
]
