"""What the fuzzer knows of a policy: its table, columns by role and the values of each
dimension, read from the policy YAML and its CSV (no guard code involved, so the harness
does not inherit the guard's own idea of the schema).

Also the confidential values a message must never carry (:func:`secrets_of`) and the test
for them (:func:`confidential_tokens`).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import cache
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
POLICIES = ROOT / "policies"

__all__ = ["POLICIES", "ROOT", "Schema", "Secrets", "confidential_tokens", "schema", "secrets_of"]


@dataclass(frozen=True)
class Schema:
    """One table of an example policy, as an analyst may learn it from the policy."""

    policy: Path
    table: str
    #: dimension -> its values in the data (ints for integer columns), sorted
    dimensions: dict[str, tuple[str | int, ...]]
    #: measure -> its declared bounds
    measures: dict[str, tuple[float, float]]
    identifiers: tuple[str, ...]

    def numeric(self, dimension: str) -> bool:
        return all(isinstance(v, int) for v in self.dimensions[dimension])

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.dimensions, *self.measures, *self.identifiers)


@cache
def schema(name: str) -> Schema:
    """The first table of ``policies/NAME.yaml`` (students, castro, hospital, hospital-dp)."""
    path = POLICIES / f"{name}.yaml"
    document = yaml.safe_load(path.read_text())
    table, spec = next(iter(document["tables"].items()))
    rows = _rows(path, spec)
    dimensions: dict[str, tuple[str | int, ...]] = {}
    measures: dict[str, tuple[float, float]] = {}
    identifiers: list[str] = []
    for column, declared in spec["columns"].items():
        role = declared["role"]
        if role == "dimension":
            values = {row[column] for row in rows}
            typed = [int(v) for v in values] if all(v.lstrip("-").isdigit() for v in values) else values
            dimensions[column] = tuple(sorted(typed))  # type: ignore[type-var]
        elif role == "measure":
            low, high = declared.get("bounds", [0, 1])
            measures[column] = (float(low), float(high))
        else:
            identifiers.append(column)
    return Schema(path, table, dimensions, measures, tuple(identifiers))


def _rows(policy: Path, table_spec: dict[str, object]) -> list[dict[str, str]]:
    source = table_spec["source"]
    assert isinstance(source, dict) and "csv" in source, f"{policy}: the fuzzer reads CSV sources only"
    with (policy.parent / str(source["csv"])).open(newline="") as handle:
        return list(csv.DictReader(handle))


@dataclass(frozen=True)
class Secrets:
    """Values of a table that no message may carry: identifiers and measures."""

    words: frozenset[str]  # lower-cased
    numbers: frozenset[Decimal]


@cache
def secrets_of(name: str) -> Secrets:
    """The identifier and measure values of ``policies/NAME.yaml``'s table (for students:
    the nine names and their incomes)."""
    found = schema(name)
    spec = yaml.safe_load(found.policy.read_text())["tables"][found.table]
    rows = _rows(found.policy, spec)
    words = {row[c].lower() for row in rows for c in found.identifiers}
    numbers = {Decimal(row[c]) for row in rows for c in found.measures if row[c]}
    return Secrets(frozenset(words), frozenset(numbers))


_WORD = re.compile(r"[^\W\d_]+")
_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?![\w])")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")


def confidential_tokens(text: str, secrets: Secrets) -> set[str]:
    """The confidential values ``text`` contains as whole tokens: a name as a word (any
    case), an income as a number (``68000``, ``68,000``, ``68000.0``); normalised (names
    lower-cased, numbers as ``68000``) so that two texts' findings compare."""
    found = {word.lower() for word in _WORD.findall(text) if word.lower() in secrets.words}
    for match in _NUMBER.findall(text):
        pieces = [match.replace(",", "")] if _THOUSANDS.fullmatch(match) else match.split(",")
        for piece in pieces:
            try:
                number = Decimal(piece) if piece else None
                if number is not None and number in secrets.numbers:
                    found.add(format(number.normalize(), "f"))
            except InvalidOperation:
                continue
    return found
