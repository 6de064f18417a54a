"""Cell suppression for tables with additive relations (pure core, engine-independent).

* :mod:`~guard.suppression.table` — cells keyed over dimensions with :data:`TOTAL`
  markers, bounds, and the relations ``total = Σ members`` derived from the keys.
* :mod:`~guard.suppression.secondary` — :func:`suppress`: sensitive cells plus
  complementary cells (MILP for small tables, LP heuristic for large ones), with a
  secret cost perturbation against seed 004's matching attack.
* :mod:`~guard.suppression.audit` — :func:`audit`: feasibility intervals of withheld
  cells by LP; :func:`failures`: sensitive cells whose interval is too narrow.
"""

from guard.suppression.audit import Failure, audit, failures, linked_suppressed
from guard.suppression.model import (
    UNVERIFIED_REFUSAL,
    Method,
    Protection,
    ProtectionInfeasible,
    ProtectionLevels,
    ProtectionUnverified,
    SuppressionOptions,
    SuppressionResult,
    Weight,
    required_levels,
)
from guard.suppression.secondary import choose_method, suppress
from guard.suppression.table import TOTAL, Key, Margin, Relation, Table, derive_relations, union

__all__ = [
    "TOTAL",
    "UNVERIFIED_REFUSAL",
    "Failure",
    "Key",
    "Margin",
    "Method",
    "Protection",
    "ProtectionInfeasible",
    "ProtectionLevels",
    "ProtectionUnverified",
    "Relation",
    "SuppressionOptions",
    "SuppressionResult",
    "Table",
    "Weight",
    "audit",
    "choose_method",
    "derive_relations",
    "failures",
    "linked_suppressed",
    "required_levels",
    "suppress",
    "union",
]
