"""Column and parameter types of a guard query, read from its shape: nothing runs.

A RowDescription is due before any row, and for a statement-level Describe before the
query may run at all. The guard's own stages 1-3 (parse, validate, analyze) give the
shape without touching the data; the output types follow from it, the engine's column
types and the table's protection mode:

- a GROUP BY key has its column's type; GROUPING(key) is int8;
- COUNT is int8;
- SUM is what the engine's SUM gives (HUGEINT/DECIMAL: numeric, DOUBLE: float8), and
  float8 under noise (a noisy sum is a real number);
- AVG is float8 (the engine averages as DOUBLE, and so does the noise mechanism);
- a flag column (session setting ``statguard.flags``) is text.

A query over protected answers (``guard.post``) is typed by running its outer query on
empty answer tables of those types: nothing is asked of the data.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from guard.core import Guard
from guard.errors import AccessDenied, QueryRejected
from guard.policy.model import NoiseMode
from guard.post.plan import OuterPlan, plan_outer
from guard.post.run import describe_outer
from guard.query.parameters import MAX_PARAMETERS, Parameter
from guard.query.parse import parse_within_limits
from guard.query.shape import AggFunc, OutputKind, QueryShape
from guard.result import flag_names
from guard.server.pgwire.types import PgType, by_name, pg_type_of_engine

__all__ = ["ResultColumn", "dummy_parameters", "guard_columns", "infer_parameter_types", "value_columns"]


@dataclass(frozen=True)
class ResultColumn:
    name: str
    type: PgType


def guard_columns(
    guard: Guard, analyst: str, sql: str, parameters: Sequence[Parameter] | None, flags: bool = False
) -> tuple[ResultColumn, ...]:
    """The columns :meth:`Guard.query` answers ``sql`` with, from stages 1-3 only.

    ``flags``: with a text column ``<label>_flag`` after each aggregate column, as
    :meth:`~guard.result.ProtectedResult.with_flag_columns` adds them. A list of values
    has its listed columns only (the count it is asked with is never answered).

    Raises:
        GuardError: what the guard's parse, validate or analyze stage raises.
    """
    policy = guard.policy
    who = policy.analyst(analyst)
    if who is None:
        raise AccessDenied(f"unknown analyst {analyst!r}")
    types_of = guard.column_types
    try:
        front = guard.front.read(sql, who, parameters)
    except QueryRejected:
        plan = plan_outer(sql, policy, who, types_of, parameters)
        if plan is None:
            raise
        return _outer_columns(plan, flags)
    shape, table = front.shape, front.table
    types = guard.backend.table_info(table.name).types
    noised = policy.noise_mode(table, who, shape.summed) is NoiseMode.NOISE
    outputs = shape.outputs[: front.answered_outputs]
    values = [
        (
            ResultColumn(o.name, _output_type(shape, o.kind, o.index, types, noised)),
            o.kind is OutputKind.AGGREGATE,
        )
        for o in outputs
    ]
    return _with_flags(values, flags)


def _with_flags(values: Sequence[tuple[ResultColumn, bool]], flags: bool) -> tuple[ResultColumn, ...]:
    """``values`` (column, whether it is flagged), each flagged one followed by its flag
    column when ``flags``, named as the answer's rows name it (:func:`flag_names`)."""
    names = (
        flag_names([c.name for c, _ in values], [i for i, (_, f) in enumerate(values) if f]) if flags else {}
    )
    columns: list[ResultColumn] = []
    for i, (column, _) in enumerate(values):
        columns.append(column)
        if i in names:
            columns.append(ResultColumn(names[i], by_name("text")))
    return tuple(columns)


def _outer_columns(plan: OuterPlan, flags: bool) -> tuple[ResultColumn, ...]:
    """The columns of a query over protected answers: its outer query run on empty
    answers gives their types; a flag column follows each output computed from
    aggregates."""
    values = [
        (ResultColumn(name, pg_type_of_engine(kind)), graded)
        for (name, kind), graded in zip(describe_outer(plan), plan.graded, strict=True)
    ]
    return _with_flags(values, flags)


def _output_type(
    shape: QueryShape, kind: OutputKind, index: int, types: Mapping[str, str], noised: bool
) -> PgType:
    if kind is OutputKind.KEY:
        return pg_type_of_engine(types.get(shape.group_by[index].lower(), "VARCHAR"))
    if kind is OutputKind.GROUPING:
        return by_name("int8")
    aggregate = shape.aggregates[index]
    if aggregate.func is AggFunc.COUNT:
        return by_name("int8")
    if aggregate.func is AggFunc.AVG or noised:
        return by_name("float8")
    measure = pg_type_of_engine(types.get((aggregate.column or "").lower(), "DOUBLE"))
    return by_name("float8") if measure.name in ("float4", "float8") else by_name("numeric")


def value_columns(names: Sequence[str], rows: Sequence[Sequence[Any]]) -> tuple[ResultColumn, ...]:
    """Column types read off the values, for an answer whose shape is not at hand."""
    columns = []
    for i, name in enumerate(names):
        values = [row[i] for row in rows if row[i] is not None]
        columns.append(ResultColumn(name, _type_of_values(values)))
    return tuple(columns)


def _type_of_values(values: Sequence[Any]) -> PgType:
    if not values:
        return by_name("text")
    if all(isinstance(v, bool) for v in values):
        return by_name("bool")
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return by_name("int8") if all(-(2**63) <= v < 2**63 for v in values) else by_name("numeric")
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return by_name("float8")
    if all(isinstance(v, int | float | decimal.Decimal) for v in values):
        return by_name("numeric")
    if all(isinstance(v, dt.datetime) for v in values):
        return by_name("timestamp")
    if all(isinstance(v, dt.date) for v in values):
        return by_name("date")
    return by_name("text")


# --- parameters --------------------------------------------------------------------

_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)
_TRANSPARENT = (exp.Cast, exp.Paren, exp.Neg, exp.Tuple)


def infer_parameter_types(guard: Guard, sql: str) -> dict[int, PgType]:
    """Parameter position (1-based) -> the type its placeholder stands for: the type of
    the column it is compared with, int8 in LIMIT/OFFSET. Positions the text does not
    tell are left out (their values are taken as text)."""
    try:
        trees = parse_within_limits(sql)
    except QueryRejected:
        return {}
    if len(trees) != 1:
        return {}
    tree = trees[0]
    types = _table_types(guard, tree)
    inferred: dict[int, PgType] = {}
    bare = 0
    for placeholder in tree.find_all(exp.Placeholder):
        if placeholder.this is None:
            bare += 1
            position = bare
        elif str(placeholder.this).isdigit() and len(str(placeholder.this)) <= 6:
            position = int(str(placeholder.this))
        else:
            continue
        if position > MAX_PARAMETERS:
            continue  # the guard rejects it; a type list that long would only cost memory
        found = _context_type(placeholder, types)
        if found is not None:
            inferred[position] = found
    return inferred


def _table_types(guard: Guard, tree: exp.Expr) -> Mapping[str, str]:
    for table in tree.find_all(exp.Table):
        declared = guard.policy.table(table.name)
        if declared is not None:
            return guard.backend.table_info(declared.name).types
    return {}


def _context_type(node: exp.Expr, types: Mapping[str, str]) -> PgType | None:
    child, parent = node, node.parent
    while isinstance(parent, _TRANSPARENT):
        child, parent = parent, parent.parent
    column: exp.Expr | None = None
    if isinstance(parent, _COMPARISONS):
        column = parent.expression if child is parent.this else parent.this
    elif isinstance(parent, exp.In | exp.Between) and child is not parent.this:
        column = parent.this
    elif isinstance(parent, exp.Limit | exp.Offset | exp.Fetch):
        return by_name("int8")
    if isinstance(column, exp.Column) and column.name.lower() in types:
        return pg_type_of_engine(types[column.name.lower()])
    return None


_DUMMIES: dict[str, Parameter] = {
    "bool": True,
    "int2": 1,
    "int4": 1,
    "int8": 1,
    "oid": 1,
    "float4": 1.0,
    "float8": 1.0,
    "numeric": decimal.Decimal(1),
    "date": dt.date(2000, 1, 1),
    "timestamp": dt.datetime(2000, 1, 1),
    "timestamptz": dt.datetime(2000, 1, 1),
}


def dummy_parameters(types: Sequence[PgType]) -> list[Parameter]:
    """A value of each parameter's type: enough to read a query's shape before its
    values are bound (the shape does not depend on them, only their types do)."""
    return [_DUMMIES.get(t.name, "x") for t in types]
