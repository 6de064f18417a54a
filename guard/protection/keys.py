"""The key space in which cells of different answers over one table meet.

A cell key has one position per dimension of the protected table (in the policy's
order): the group's value where the answer groups by that dimension or fixes it with a
one-value filter (``WHERE town = 'Enfield'``), and :data:`~guard.suppression.TOTAL`
where the cell adds over every value of it. Cells of different answers that share a key
are the same number, and :func:`guard.protection.relations.relations_between` reads the
additive relations between keys (a total is the sum of its members).

Positions are encoded as text with a type tag, so keys compare equal across answers
whatever Python type the engine returned (an integer 2 and a DOUBLE 2.0 are one value)
and can be stored in the state store as they are.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from guard.query.shape import AggFunc, Aggregate, Predicate, PredOp, QueryShape
from guard.suppression import TOTAL, Key

__all__ = [
    "aggregate_of",
    "encode_value",
    "fixed_positions",
    "key_encoder",
    "key_from_text",
    "key_text",
    "readable",
    "space_of",
]


def encode_value(value: Any) -> str:
    """One key position as tagged text."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"b:{str(value).lower()}"
    if isinstance(value, int):
        return f"n:{value}"
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value):
            return f"n:{int(value)}"
        return f"n:{value!r}"
    if isinstance(value, str):
        return f"s:{value}"
    if isinstance(value, dt.datetime | dt.date):
        return f"t:{value.isoformat()}"
    return f"x:{value!r}"


def space_of(aggregate: Aggregate) -> str:
    """The additive quantity an aggregate's cells belong to.

    COUNT(*) and COUNT(col) are frequency spaces; SUM(col) and AVG(col) share the
    magnitude space ``sum(col)``: an average released next to its (public or released)
    count is its sum, so averages are protected as the sums they imply.
    """
    if aggregate.column is None:
        return "count(*)"
    if aggregate.func is AggFunc.COUNT:
        return f"count({aggregate.column})"
    return f"sum({aggregate.column})"


def aggregate_of(space: str) -> Aggregate:
    """The additive aggregate a space's table holds (inverse of :func:`space_of`)."""
    func, _, rest = space.partition("(")
    column = rest.rstrip(")")
    if column == "*":
        return Aggregate(AggFunc.COUNT, None)
    return Aggregate(AggFunc.COUNT if func == "count" else AggFunc.SUM, column)


def fixed_positions(shape: QueryShape, dimensions: Sequence[str]) -> dict[int, str] | None:
    """Dimension positions an answer fixes by its filter, or None when its filter
    cannot be written as a key (any condition other than ``dim = value`` /
    ``dim IS NULL``): such an answer's cells live in a key space of their own."""
    position = {d.lower(): i for i, d in enumerate(dimensions)}
    fixed: dict[int, str] = {}
    for predicate in shape.predicates:
        if not isinstance(predicate, Predicate):
            return None  # a disjunction fixes no position
        j = position.get(predicate.column.lower())
        if j is None:
            return None
        if predicate.op is PredOp.IN and len(predicate.values) == 1:
            fixed[j] = encode_value(predicate.values[0])
        elif predicate.op is PredOp.IS_NULL:
            fixed[j] = encode_value(None)
        else:
            return None
    return fixed


def key_encoder(
    dimensions: Sequence[str], group_by: Sequence[str], fixed: Mapping[int, str]
) -> Callable[[Sequence[Any], Sequence[bool]], Key]:
    """``encode(values, rolled_up)``: the key of one answer row (group values, fixed
    filter values, TOTAL elsewhere). Positions are resolved once, not per row."""
    position = {d.lower(): i for i, d in enumerate(dimensions)}
    slots = [position[name.lower()] for name in group_by]
    template: list[Any] = [TOTAL] * len(dimensions)
    for j, text in fixed.items():
        template[j] = text

    # a grid repeats each dimension's few values over many rows: encode each once. Only
    # text and integers are kept, whose equal values always encode alike (1 == 1.0 ==
    # True, and Decimal('1') == Decimal('1.0'), encode differently)
    known: dict[Any, str] = {}

    def encode(values: Sequence[Any], rolled_up: Sequence[bool]) -> Key:
        key = list(template)
        for i, slot in enumerate(slots):
            if not (rolled_up and rolled_up[i]):
                value = values[i]
                kind = type(value)
                if kind is str or kind is int:
                    text = known.get(value)
                    if text is None:
                        text = known[value] = encode_value(value)
                    key[slot] = text
                else:
                    key[slot] = encode_value(value)
        return tuple(key)

    return encode


def key_text(key: Key) -> str:
    """A key as stable JSON text (for the state store)."""
    return json.dumps(["*" if k is TOTAL else k for k in key], separators=(",", ":"))


def key_from_text(text: str) -> Key:
    return tuple(TOTAL if k == "*" else k for k in json.loads(text))


def readable(key: Key, dimensions: Sequence[str]) -> str:
    """A key for people: ``town=Enfield, sex=(all)``."""
    parts = []
    for name, k in zip(dimensions, key, strict=True):
        shown = "(all)" if k is TOTAL else ("NULL" if k == "null" else str(k).split(":", 1)[-1])
        parts.append(f"{name}={shown}")
    return ", ".join(parts)
