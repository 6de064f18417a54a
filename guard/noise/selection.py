"""The canonical selection of one cell: the key its noisy answer is cached under.

A noisy answer is released once per thing measured, so that asking again, in any
phrasing, gains nothing (averaging). "The same thing" must be decided WITHOUT looking
at the data: two selections are the same here when they are equal for every table with
the policy's schema. The selection of a cell is the query's WHERE conjuncts plus the
cell's group key values, normalized per column:

- ``x = v``, ``v = x``, ``x IN (v)``, a GROUP BY cell ``x = v`` are all ``{"in": [v]}``;
  several IN lists intersect, ``<>`` values and ranges filter them;
- ranges become one interval (``BETWEEN a AND b`` is ``x >= a AND x <= b``); on integer
  columns strict bounds close (``x > 29`` is ``x >= 30``) and a one-point interval is
  ``{"in": [v]}``;
- comparisons imply ``IS NOT NULL``; a contradiction (``x IS NULL AND x = 1``, an empty
  interval) is the empty selection;
- conjunct order, letter case of column names and duplicates do not matter.

Deliberately NOT the set of rows a cell happens to cover: if two different predicates
that select the same rows on this data shared one answer, the identical answer (and the
absent charge) would tell the analyst that the two row sets are equal, e.g. that nobody
in Enfield is 47: the set-equality oracle that broke Diffix's sticky noise (Gadotti et
al., USENIX Security 2019). Such queries get independent noise and are paid for; the
budget bounds what averaging them can gain.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from guard.query.shape import AnyOf, Condition, Predicate, PredOp, Scalar, jsonable

__all__ = ["EMPTY", "cell_selection"]

#: the canonical form of a selection no row can satisfy
EMPTY = '{"empty":true}'

_INTEGER_TYPES = frozenset(
    ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT")
)


class _Contradiction(Exception):
    """No row satisfies the column's conditions."""


@dataclass
class _Column:
    """Everything the conjuncts say about one column."""

    integer: bool
    null: bool | None = None  # True: IS NULL; False: IS NOT NULL; None: not said
    values: set[Any] | None = None  # IN list (intersected)
    excluded: set[Any] = field(default_factory=set)
    low: tuple[Any, bool] | None = None  # (bound, inclusive)
    high: tuple[Any, bool] | None = None
    contradicted: bool = False  # IS NULL and IS NOT NULL both said
    #: one form per class of equal constants (3 and 3.0): sets and bounds keep whichever
    #: came first, so the key names each by the first type name instead, whatever the
    #: conjuncts' order (a key that moved with the order would draw fresh noise)
    forms: dict[Any, Any] = field(default_factory=dict)

    def add(self, predicate: Predicate) -> None:
        op, values = predicate.op, predicate.values
        if self.integer:  # 30.0 and 30 are one value of an integer column
            values = tuple(int(v) if isinstance(v, float) and v.is_integer() else v for v in values)
        for value in values:
            seen = self.forms.get(value)
            if seen is None or type(value).__name__ < type(seen).__name__:
                self.forms[value] = value
        if op in (PredOp.IS_NULL, PredOp.IS_NOT_NULL):
            wanted = op is PredOp.IS_NULL
            self.contradicted = self.contradicted or self.null is (not wanted)
            self.null = wanted
        elif op is PredOp.IN:
            chosen = set(values)
            self.values = chosen if self.values is None else self.values & chosen
        elif op is PredOp.NE:
            self.excluded.add(values[0])
        elif op is PredOp.BETWEEN:
            self._raise_low(values[0], True)
            self._lower_high(values[1], True)
        elif op in (PredOp.GT, PredOp.GE):
            self._raise_low(values[0], op is PredOp.GE)
        else:
            self._lower_high(values[0], op is PredOp.LE)

    def _raise_low(self, value: Any, inclusive: bool) -> None:
        if self.low is None or value > self.low[0] or (value == self.low[0] and not inclusive):
            self.low = (value, inclusive)

    def _lower_high(self, value: Any, inclusive: bool) -> None:
        if self.high is None or value < self.high[0] or (value == self.high[0] and not inclusive):
            self.high = (value, inclusive)

    def canonical(self) -> dict[str, Any] | None:
        """The normalized conditions (None: no condition at all). Raises _Contradiction."""
        compared = self.values is not None or self.excluded or self.low or self.high
        if self.contradicted:
            raise _Contradiction
        if self.null is True:
            if compared:
                raise _Contradiction
            return {"is": "null"}
        if self.integer:
            self._close_integer_bounds()
        if self.values is not None:
            kept = {v for v in self.values if self._inside(v) and v not in self.excluded}
            if not kept:
                raise _Contradiction
            return {"in": _sorted({self._form(v) for v in kept})}
        if self.low and self.high:
            (lo, lo_in), (hi, hi_in) = self.low, self.high
            if lo > hi or (lo == hi and not (lo_in and hi_in)):
                raise _Contradiction
            if lo == hi:
                if lo in self.excluded:
                    raise _Contradiction
                return {"in": [jsonable(self._form(lo))]}
        out: dict[str, Any] = {}
        if self.low:
            out["ge" if self.low[1] else "gt"] = jsonable(self._form(self.low[0]))
        if self.high:
            out["le" if self.high[1] else "lt"] = jsonable(self._form(self.high[0]))
        excluded = [self._form(v) for v in self.excluded if self._inside(v)]
        if excluded:
            out["ne"] = _sorted(excluded)
        if not out and self.null is False:
            out["is"] = "not null"
        return out or None

    def _form(self, value: Any) -> Any:
        return self.forms.get(value, value)

    def _close_integer_bounds(self) -> None:
        if self.low and _is_number(self.low[0]):
            value, inclusive = self.low
            self.low = (math.ceil(value) if inclusive else math.floor(value) + 1, True)
        if self.high and _is_number(self.high[0]):
            value, inclusive = self.high
            self.high = (math.floor(value) if inclusive else math.ceil(value) - 1, True)

    def _inside(self, value: Any) -> bool:
        try:
            if self.low and (value < self.low[0] or (value == self.low[0] and not self.low[1])):
                return False
            if self.high and (value > self.high[0] or (value == self.high[0] and not self.high[1])):
                return False
        except TypeError:  # a constant of another type than the bound: keep it as said
            return True
        return True


def cell_selection(
    predicates: Iterable[Condition],
    keys: Sequence[tuple[str, Scalar | None]],
    types: Mapping[str, str],
) -> str:
    """The canonical JSON of the rows a cell selects: WHERE conjuncts ∧ key = value
    (``None``: the key IS NULL). ``types`` maps column names to engine type names (only
    integer-ness is read). Equal for selections equal on every possible table.

    A disjunction (:class:`AnyOf`) is kept as the query's canonical form states it, next
    to the per-column conditions: a selection with one never shares a key with one
    without, and two phrasings of one disjunction that differ there are paid for apart
    (as any two selections equal only on this data)."""
    columns: dict[str, _Column] = {}
    disjunctions: list[AnyOf] = []
    lowered_types = {name.lower(): kind.upper() for name, kind in types.items()}

    def column(name: str) -> _Column:
        lowered = name.lower()
        if lowered not in columns:
            columns[lowered] = _Column(integer=lowered_types.get(lowered, "") in _INTEGER_TYPES)
        return columns[lowered]

    for predicate in predicates:
        if isinstance(predicate, AnyOf):
            disjunctions.append(predicate)
        else:
            column(predicate.column).add(predicate)
    for name, value in keys:
        op = PredOp.IS_NULL if value is None else PredOp.IN
        column(name).add(Predicate(name, op, () if value is None else (value,)))
    canonical: dict[str, Any] = {}
    try:
        for name in sorted(columns):
            conditions = columns[name].canonical()
            if conditions is not None:
                canonical[name] = conditions
    except _Contradiction:
        return EMPTY
    if disjunctions:
        # a column's conditions are objects, so this list form cannot be a column's
        either = [d.canonical()[1] for d in sorted(disjunctions, key=AnyOf.sort_key)]
        return json.dumps({"and": canonical, "or": either}, sort_keys=True, separators=(",", ":"))
    return json.dumps(canonical, sort_keys=True, separators=(",", ":"))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _sorted(values: Iterable[Any]) -> list[Any]:
    return [jsonable(v) for v in sorted(values, key=lambda v: (type(v).__name__, v))]
