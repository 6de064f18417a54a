"""Which cells are sensitive, and how much protection each needs.

Every cell is judged by the query-set-size control and by the policy's rules:

* frequency cells (COUNT) are judged by the threshold rules only, on the number of
  respondents; their protection level is never below 1 (counts are integers, so an
  interval narrower than ±1 around a count pins it);
* magnitude cells (SUM, and AVG judged as the sum it implies) by every rule, on the
  per-respondent contributions the backend computed (summed per privacy unit inside the
  cell; negative contributions by magnitude, see :mod:`guard.rules.contributions`).

A cell the query-set-size control withholds needs protection like a threshold-rule
cell (:class:`guard.rules.query_set_size.QuerySetSize`).
"""

from __future__ import annotations

import dataclasses
import functools

from guard.cells import Cell
from guard.policy.model import Protection
from guard.rules import CellContributions, MinimumFrequency, Rule, RuleVerdict, combine
from guard.rules.query_set_size import QuerySetSize

__all__ = ["MAX_VERDICTS", "Verdicts", "is_frequency", "judge", "sensitive_rows"]

#: verdicts a :class:`Verdicts` keeps (then it starts again)
MAX_VERDICTS = 200_000


def is_frequency(space: str) -> bool:
    return space.startswith("count(")


def judge(cell: Cell, space: str, protection: Protection) -> RuleVerdict:
    """The combined verdict of the query-set-size control and the rules on one cell."""
    frequency = is_frequency(space)
    floor = 1.0 if frequency else 0.0
    verdicts: list[RuleVerdict] = []
    size = _size_rule(protection.min_query_set_size, protection.allow_full_population)(cell, floor)
    if size is not None:
        verdicts.append(size)
    if protection.rules and cell.units > 0:
        verdicts.extend(
            rule(_contributions(cell, frequency)) for rule in _applicable(protection.rules, frequency)
        )
    return combine(verdicts)


class Verdicts:
    """:func:`judge` remembered per (space, cell) for one ``protection``. A verdict is a
    function of the cell's fields, the space and the protection only, and a linked answer
    judges again every cell of the earlier answers it is protected with (thousands an
    answer); a remembered verdict is the one judging again would give. The value's type
    is part of the key, so cells equal across numeric types are still judged apart."""

    def __init__(self, protection: Protection, limit: int = MAX_VERDICTS) -> None:
        self.protection = protection
        self._limit = limit
        self._known: dict[tuple[str, type, Cell], RuleVerdict] = {}

    def __call__(self, cell: Cell, space: str) -> RuleVerdict:
        key = (space, type(cell.value), cell)
        found = self._known.get(key)
        if found is None:
            found = judge(cell, space, self.protection)
            if len(self._known) >= self._limit:
                self._known.clear()
            self._known[key] = found
        return found


@functools.cache
def _size_rule(k: int, allow_full_population: bool) -> QuerySetSize:
    return QuerySetSize(k, allow_full_population)


@functools.cache
def _applicable(rules: tuple[Rule, ...], frequency: bool) -> tuple[Rule, ...]:
    """The rules for one kind of cell (cached: called once per cell, rules are frozen)."""
    if not frequency:
        return rules
    # a count table is protected by the threshold rule; a level below 1 protects no count
    return tuple(
        MinimumFrequency(r.threshold, r.fraction, max(r.floor, 1.0))
        for r in rules
        if isinstance(r, MinimumFrequency)
    )


def _contributions(cell: Cell, frequency: bool) -> CellContributions:
    if frequency:
        return CellContributions(total=abs(float(cell.value or 0)), contributors=cell.units)
    magnitude = cell.magnitude if cell.magnitude is not None else abs(float(cell.value or 0))
    top = tuple(sorted((abs(float(x)) for x in cell.top), reverse=True))
    # the engine sums in another order than fsum: never let rounding make top > total
    return CellContributions(total=max(magnitude, sum(top)), contributors=cell.units, top=top)


def sensitive_rows(
    values: dict[str, list[Cell]], protection: Protection
) -> dict[str, list[tuple[int, tuple[float, float]]]]:
    """Per magnitude space: the positions of the cells the *rules* flag, with their
    (lower, upper) protection levels (the query-set size is left out: the history audit's
    k protects small groups itself). Used on the finest cells of a table, which nobody
    may have asked for."""
    if not protection.rules:
        return {}
    rules_only = dataclasses.replace(protection, min_query_set_size=1, allow_full_population=True)
    found: dict[str, list[tuple[int, tuple[float, float]]]] = {}
    for space, cells in values.items():
        if is_frequency(space):
            continue
        verdicts = [judge(cell, space, rules_only) for cell in cells]
        found[space] = [(i, (v.lower, v.upper)) for i, v in enumerate(verdicts) if v.sensitive]
    return found
