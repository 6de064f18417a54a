"""Derived dimensions: a dimension the steward computes from one declared column.

A derived dimension is a column of the protected table as every stage sees it: the
snapshot computes it once from its source (``guard.backends.derive`` builds the one SQL
expression), so predicates, groupings, protection, the history audit and the catalog
treat it like any declared dimension. Its value is a function of its source's value, so
it never splits a finest cell whose source is a dimension; a band of a measure does
(banding a measure makes a public grouping variable of it: the steward's choice).

Three kinds (policies/README.md, "Derived dimensions"): bands of a numeric column, a
map of values to coarser ones (a hierarchy, inline or from a CSV file) and value labels
(one label per code). NULL stays NULL; a value a map does not cover gets ``other`` or,
without it, makes the snapshot fail with a policy error (strict by default).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

__all__ = ["Band", "Derivation", "DerivationKind", "MapKey"]

#: a map key as the policy wrote it: a number (for a numeric source) or a text
MapKey = int | float | str


class DerivationKind(Enum):
    #: ordered numeric intervals, each with a label
    BANDS = "bands"
    #: many values to one coarser value (a hierarchy level)
    MAP = "map"
    #: one label per code (a one-to-one map)
    LABELS = "labels"


@dataclass(frozen=True)
class Band:
    """One band: the values up to ``upper`` that no earlier band took. ``upper`` None
    (only the last band): every larger value. ``inclusive``: ``upto`` (<=) rather than
    ``below`` (<)."""

    label: str
    upper: float | None = None
    inclusive: bool = True


@dataclass(frozen=True)
class Derivation:
    """How a derived dimension is computed from its ``source`` column."""

    kind: DerivationKind
    #: the declared column it is computed from (never an identifier, never derived)
    source: str
    bands: tuple[Band, ...] = ()
    #: (value of the source, label) of a map or labels, in the policy's order
    mapping: tuple[tuple[MapKey, str], ...] = ()
    #: label of a non-NULL value the map does not cover; None: such a value is an error
    other: str | None = None
    #: the CSV file a map was read from (its content is ``mapping``); None: inline
    file: Path | None = None

    def declaration(self) -> list[object]:
        """A JSON-able statement of the derivation, part of the table's data version: a
        change of bands or map is a new version (and a new snapshot)."""
        return [
            self.kind.value,
            self.source,
            [[b.label, b.upper, b.inclusive] for b in self.bands],
            [[type(k).__name__, k, label] for k, label in self.mapping],
            self.other,
        ]
