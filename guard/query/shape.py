"""The typed description of an accepted query: what it selects, over which rows."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from enum import Enum

__all__ = [
    "AggFunc",
    "Aggregate",
    "AnyOf",
    "Condition",
    "OrderItem",
    "Output",
    "OutputKind",
    "PredOp",
    "Predicate",
    "QueryShape",
    "Scalar",
    "jsonable",
    "order_of",
    "typed_predicates",
]

#: a constant an analyst may compare a dimension with
Scalar = str | int | float | bool | dt.date | dt.datetime


class AggFunc(Enum):
    COUNT = "count"
    SUM = "sum"
    AVG = "avg"


@dataclass(frozen=True, order=True)
class Aggregate:
    func: AggFunc
    #: the aggregated column; None for COUNT(*)
    column: str | None

    @property
    def label(self) -> str:
        return f"{self.func.value}({self.column or '*'})"

    def sort_key(self) -> tuple[str, str]:
        return (self.func.value, self.column or "")


class PredOp(Enum):
    IN = "in"  # also every `=`: one-value IN, so re-phrasings share one canonical form
    NE = "<>"
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    BETWEEN = "between"
    IS_NULL = "is null"
    IS_NOT_NULL = "is not null"


@dataclass(frozen=True)
class Predicate:
    """One conjunct of the WHERE clause: a dimension compared with constants."""

    column: str
    op: PredOp
    values: tuple[Scalar, ...] = ()

    def canonical(self) -> list[object]:
        """``[column, op, values]`` as JSON holds them: the form keys and logs use."""
        return [self.column, self.op.value, [jsonable(v) for v in self.values]]

    def sort_key(self) -> str:
        return json.dumps(self.canonical())


@dataclass(frozen=True)
class AnyOf:
    """One conjunct of the WHERE clause that is a disjunction: rows meeting at least one
    of ``alternatives`` (comparisons of different columns, or ranges of one, that no
    single comparison states), in canonical order. Allowed only where answers are
    audited on rows (:func:`guard.query.front.read_query`)."""

    alternatives: tuple[Predicate, ...]

    def canonical(self) -> list[object]:
        return ["or", [p.canonical() for p in self.alternatives]]

    def sort_key(self) -> str:
        return json.dumps(self.canonical())


#: one conjunct of a normalized WHERE clause
Condition = Predicate | AnyOf


class OutputKind(Enum):
    KEY = "key"  # a GROUP BY dimension
    AGGREGATE = "aggregate"
    #: GROUPING(key): 1 in the rows where that key is rolled up (a total), else 0
    GROUPING = "grouping"


@dataclass(frozen=True)
class Output:
    name: str
    kind: OutputKind
    #: index into QueryShape.group_by (KEY, GROUPING) or QueryShape.aggregates (AGGREGATE)
    index: int


@dataclass(frozen=True)
class OrderItem:
    output: int  # index into QueryShape.outputs
    descending: bool = False
    nulls_first: bool = False


@dataclass(frozen=True)
class QueryShape:
    """An accepted query, normalized. Everything the guard decides on is here."""

    table: str
    #: the WHERE clause as a conjunction (:mod:`guard.query.formula`)
    predicates: tuple[Condition, ...]
    #: every grouping key, in order of first appearance in GROUP BY
    group_by: tuple[str, ...]
    #: () for a plain GROUP BY (one grouping set: all of ``group_by``). Otherwise the
    #: distinct grouping sets of ROLLUP / CUBE / GROUPING SETS, each a tuple of names of
    #: ``group_by`` in ``group_by`` order, longest first, then by key positions. Keyword-only
    #: so that the positional fields keep their places.
    grouping_sets: tuple[tuple[str, ...], ...] = field(default=(), kw_only=True)
    aggregates: tuple[Aggregate, ...]
    outputs: tuple[Output, ...]
    order_by: tuple[OrderItem, ...] = ()
    limit: int | None = None
    offset: int = 0

    @property
    def summed(self) -> tuple[str, ...]:
        """The measures the query sums or averages (a COUNT reads no measure's value)."""
        return tuple(
            dict.fromkeys(a.column for a in self.aggregates if a.func is not AggFunc.COUNT and a.column)
        )

    @property
    def levels(self) -> tuple[tuple[str, ...], ...]:
        """The grouping sets the answer has rows for: ``grouping_sets``, or the one set
        ``group_by`` of a plain GROUP BY (``((),)`` without GROUP BY)."""
        return self.grouping_sets or (self.group_by,)

    def rolled_up(self, gid: int) -> tuple[bool, ...]:
        """Per key of ``group_by``: rolled up (a total) in a row with grouping id
        ``gid``, DuckDB's GROUPING(k1, ..., kn) with k1 the most significant bit."""
        n = len(self.group_by)
        return tuple(bool(int(gid) >> (n - 1 - i) & 1) for i in range(n))

    def kept_keys(self, gid: int) -> tuple[str, ...]:
        """The keys of ``group_by`` not rolled up in a row with grouping id ``gid``."""
        return tuple(k for k, up in zip(self.group_by, self.rolled_up(gid), strict=True) if not up)

    def grouping_id(self, kept: tuple[str, ...]) -> int:
        """The grouping id of the rows of the grouping set ``kept`` (inverse of
        :meth:`kept_keys`)."""
        n = len(self.group_by)
        return sum(1 << (n - 1 - i) for i, key in enumerate(self.group_by) if key not in kept)

    @property
    def canonical(self) -> str:
        """The key of what is measured: table, row selection, grouping, aggregates.

        Equivalent phrasings (swapped conjuncts, ``x = v`` vs ``x IN (v)``, reversed
        comparisons, output order and aliases, ROLLUP vs the GROUPING SETS it expands to)
        share one canonical key. A plain GROUP BY has no ``grouping_sets`` entry, so its
        key is the same as before grouping sets existed.
        """
        key: dict[str, object] = {
            "table": self.table,
            "where": [p.canonical() for p in self.predicates],
            "group_by": sorted(self.group_by),
        }
        if self.grouping_sets:
            key["grouping_sets"] = sorted(sorted(s) for s in self.grouping_sets)
        key["aggregates"] = sorted(a.label for a in self.aggregates)
        return json.dumps(key, separators=(",", ":"))


def order_of(value: Scalar) -> tuple[str, str]:
    """A total order over constants of mixed types (for canonical IN lists)."""
    return (type(value).__name__, repr(value))


def typed_predicates(predicates: tuple[Condition, ...]) -> tuple[object, ...]:
    """``predicates`` as a dictionary key that also holds each constant's type: ``1``,
    ``1.0`` and ``True`` are equal (and hash alike) in Python, not to an engine."""
    return tuple(
        ("or", tuple(_typed(p) for p in c.alternatives)) if isinstance(c, AnyOf) else _typed(c)
        for c in predicates
    )


def _typed(p: Predicate) -> tuple[object, ...]:
    return (p.column, p.op, tuple((type(v), v) for v in p.values))


def jsonable(value: Scalar) -> str | int | float | bool:
    """``value`` as JSON can hold it (dates as ISO text)."""
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    return value
