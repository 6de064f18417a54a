"""Stage 3: read each clause of a validated SELECT into a :class:`QueryShape`.

Column roles are enforced here: identifiers nowhere, measures only inside COUNT/SUM/AVG,
WHERE and GROUP BY only on dimensions, compared with plain constants. Restricting
predicates to public columns makes every refusal a function of public data, so a refusal
never leaks a confidential value (docs/ARCHITECTURE.md).

GROUP BY may use ROLLUP, CUBE and GROUPING SETS (expanded by :mod:`grouping`), and the
output may hold GROUPING(key) for one key of GROUP BY: 1 in the rows where that key is
rolled up, else 0. It is accepted in a plain GROUP BY too (always 0, as in DuckDB), so
a query keeps working when its grouping sets are reduced to one.
"""

from __future__ import annotations

import datetime as dt
import difflib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TypeAlias

from sqlglot import exp

from guard.errors import QueryRejected
from guard.policy.model import Column, Limits, Role, Table
from guard.query.grouping import expand_group_by
from guard.query.shape import (
    AggFunc,
    Aggregate,
    OrderItem,
    Output,
    OutputKind,
    Predicate,
    PredOp,
    QueryShape,
    Scalar,
)

__all__ = ["NUMERIC_TYPES", "analyze"]

NUMERIC_TYPES = frozenset(
    {
        "TINYINT",
        "SMALLINT",
        "INTEGER",
        "BIGINT",
        "HUGEINT",
        "UTINYINT",
        "USMALLINT",
        "UINTEGER",
        "UBIGINT",
        "UHUGEINT",
        "FLOAT",
        "DOUBLE",
        "DECIMAL",
    }
)
_TEMPORAL_TYPES = ("DATE", "TIMESTAMP", "TIME")

_AGGREGATES: dict[type[exp.Expr], AggFunc] = {
    exp.Count: AggFunc.COUNT,
    exp.Sum: AggFunc.SUM,
    exp.Avg: AggFunc.AVG,
}
_COMPARISONS: dict[type[exp.Expr], PredOp] = {
    exp.EQ: PredOp.IN,
    exp.NEQ: PredOp.NE,
    exp.LT: PredOp.LT,
    exp.LTE: PredOp.LE,
    exp.GT: PredOp.GT,
    exp.GTE: PredOp.GE,
}
# `5 < x` reads as `x > 5`
_MIRRORED = {PredOp.LT: PredOp.GT, PredOp.LE: PredOp.GE, PredOp.GT: PredOp.LT, PredOp.GE: PredOp.LE}
_PATTERN_MATCH = (exp.Like, exp.ILike, exp.RegexpLike, exp.SimilarTo, exp.Glob)
# Numbers an analyst may compare with: what the engine's widest integer (HUGEINT) holds.
# Larger literals fail in the engine, and Python refuses to print ints over 4300 digits.
_MAX_INTEGER = 2**127 - 1
# LIMIT, OFFSET and ordinals are ASCII digits (str.isdigit also accepts '²', which int() does not).
_WHOLE_NUMBER = re.compile(r"[0-9]{1,18}")


@dataclass(frozen=True)
class _Grouping:
    """A GROUPING(key) output: whether ``key`` is rolled up in a row."""

    column: Column

    @property
    def label(self) -> str:
        return f"grouping({self.column.name})"


#: what one output column selects
_Item: TypeAlias = Aggregate | Column | _Grouping


class _Scope:
    """The one table a query reads, its alias and its column types."""

    def __init__(self, table: Table, alias: str | None, types: Mapping[str, str]) -> None:
        self.table = table
        self.alias = alias
        self.types = types

    def column(self, node: exp.Column, *, clause: str) -> Column:
        if node.args.get("db") or node.args.get("catalog"):
            raise QueryRejected(
                f"{node.sql(dialect='duckdb')}: qualify a column with the table name or alias only, "
                f"e.g. {self.alias or self.table.name}.{node.name}"
            )
        qualifier = node.table
        if qualifier and qualifier.lower() not in {
            self.table.name.lower(),
            (self.alias or "").lower(),
        }:
            raise QueryRejected(
                f"unknown table qualifier {qualifier!r} in {node.sql()}: only {self.table.name} is queried"
            )
        column = self.table.column(node.name)
        if column is None:
            usable = [c.name for c in self.table.columns if c.role is not Role.IDENTIFIER]
            close = difflib.get_close_matches(node.name.lower(), [u.lower() for u in usable], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise QueryRejected(
                f"unknown column {node.name!r} in table {self.table.name}{hint}: "
                f"the columns you may use are {', '.join(usable)}"
            )
        if column.role is Role.IDENTIFIER:
            raise QueryRejected(
                f"column {column.name!r} identifies respondents and cannot be used "
                f"anywhere in a query ({clause} included)"
            )
        return column

    def dimension(self, node: exp.Column, *, clause: str) -> Column:
        column = self.column(node, clause=clause)
        if column.role is Role.MEASURE:
            dims = ", ".join(self.table.names(Role.DIMENSION)) or "none"
            raise QueryRejected(
                f"measure {column.name!r} cannot be used in {clause}: it may only appear inside "
                f"COUNT, SUM or AVG; {clause} may use the dimension columns ({dims})"
            )
        return column

    def type_of(self, column: Column) -> str:
        return self.types.get(column.name.lower(), "VARCHAR")


def analyze(select: exp.Select, table: Table, types: Mapping[str, str], limits: Limits) -> QueryShape:
    """Interpret a validated SELECT over ``table``.

    ``types`` maps lower-cased column names to the engine's type names.

    Raises:
        QueryRejected: a clause uses a column or construct it may not.
    """
    from_ = select.args.get("from_") or select.args.get("from")
    assert from_ is not None  # validate() guarantees one FROM table
    alias = from_.this.alias or None
    scope = _Scope(table, alias, types)
    projections = _projections(select, scope)
    group_by, grouping_sets = _group_by(select, scope, projections)
    predicates = _where(select, scope, limits)

    aggregates: list[Aggregate] = []
    outputs: list[Output] = []
    for name, item in projections:
        if isinstance(item, Aggregate):
            if item not in aggregates:
                aggregates.append(item)
            outputs.append(Output(name, OutputKind.AGGREGATE, aggregates.index(item)))
        elif isinstance(item, _Grouping):
            if item.column.name not in group_by:
                keys = f"the keys are {', '.join(group_by)}" if group_by else "the query has no GROUP BY"
                raise QueryRejected(
                    f"GROUPING({item.column.name}): {item.column.name!r} is not a grouping key ({keys}); "
                    "GROUPING takes one column of GROUP BY"
                )
            outputs.append(Output(name, OutputKind.GROUPING, group_by.index(item.column.name)))
        else:
            if item.name not in group_by:
                raise QueryRejected(
                    f"column {item.name!r} must appear in GROUP BY or inside an aggregate (COUNT, SUM, AVG)"
                )
            outputs.append(Output(name, OutputKind.KEY, group_by.index(item.name)))
    if not aggregates:
        raise QueryRejected(
            "the output has no aggregate: select COUNT(*), COUNT(column), SUM(measure) or "
            "AVG(measure), optionally grouped by dimension columns"
        )
    order_by = _order_by(select, scope, projections, outputs)
    limit, offset = _limit(select)
    return QueryShape(
        table=table.name,
        predicates=predicates,
        group_by=tuple(group_by),
        grouping_sets=grouping_sets,
        aggregates=tuple(aggregates),
        outputs=tuple(outputs),
        order_by=order_by,
        limit=limit,
        offset=offset,
    )


def _projections(select: exp.Select, scope: _Scope) -> list[tuple[str, _Item]]:
    items: list[tuple[str, _Item]] = []
    for projection in select.expressions:
        node = (projection.this if isinstance(projection, exp.Alias) else projection).unnest()
        if isinstance(node, exp.Column):
            column = scope.column(node, clause="the output")
            if column.role is Role.MEASURE:
                raise QueryRejected(
                    f"measure {column.name!r} cannot be output row by row: aggregate it, "
                    f"e.g. SUM({column.name}) or AVG({column.name})"
                )
            items.append((projection.alias_or_name or column.name, column))
        elif isinstance(node, exp.Grouping | exp.GroupingId):
            grouping = _grouping(node, scope)
            name = projection.alias if isinstance(projection, exp.Alias) else grouping.label
            items.append((name, grouping))
        else:
            aggregate = _aggregate(node, scope)
            name = projection.alias if isinstance(projection, exp.Alias) else aggregate.label
            items.append((name, aggregate))
    return items


def _aggregate(node: exp.Expr, scope: _Scope) -> Aggregate:
    if isinstance(node, exp.Filter):
        raise QueryRejected("aggregate FILTER clauses are not allowed: filter rows in WHERE")
    if isinstance(node, exp.IgnoreNulls | exp.RespectNulls):
        raise QueryRejected(
            f"{node.sql(dialect='duckdb')}: IGNORE/RESPECT NULLS is not allowed; COUNT(column), "
            "SUM and AVG already skip NULLs: write the aggregate without it"
        )
    func = _AGGREGATES.get(type(node))
    if func is None:
        raise QueryRejected(_not_an_aggregate(node))
    argument = node.this.unnest() if isinstance(node.this, exp.Expr) else node.this
    if func is AggFunc.COUNT and isinstance(argument, exp.Star):
        return Aggregate(AggFunc.COUNT, None)
    if isinstance(argument, exp.Distinct):
        raise QueryRejected(
            f"{func.value.upper()}(DISTINCT ...) is not allowed: aggregates over distinct values "
            "are not protected by the guard's controls; use COUNT(*) grouped by the column, "
            f"or {func.value.upper()} without DISTINCT"
        )
    if not isinstance(argument, exp.Column) or node.expressions:
        raise QueryRejected(
            f"aggregate arguments must be one bare column: write {func.value.upper()}(column), "
            f"not {node.sql(dialect='duckdb')}"
        )
    column = scope.column(argument, clause="an aggregate")
    if func is not AggFunc.COUNT and column.role is not Role.MEASURE:
        measures = ", ".join(scope.table.names(Role.MEASURE)) or "none"
        raise QueryRejected(
            f"{func.value.upper()} needs a measure column; {column.name!r} is a dimension "
            f"(measures: {measures}); use COUNT(*) grouped by {column.name} instead"
        )
    return Aggregate(func, column.name)


def _grouping(node: exp.Grouping | exp.GroupingId, scope: _Scope) -> _Grouping:
    """GROUPING(key), with one key of GROUP BY (checked once the keys are known)."""
    text = node.sql(dialect="duckdb")
    arguments = [a.unnest() for a in node.expressions]
    if isinstance(node, exp.GroupingId) or len(arguments) != 1:
        columns = [a.name for a in arguments if isinstance(a, exp.Column)] or ["key"]
        instead = ", ".join(f"GROUPING({c})" for c in columns)
        raise QueryRejected(
            f"{text}: GROUPING takes exactly one grouping column (a bitmask over several keys "
            f"is not supported): write one per key, {instead}"
        )
    argument = arguments[0]
    if not isinstance(argument, exp.Column):
        raise QueryRejected(
            f"{text}: GROUPING takes one bare grouping column, e.g. GROUPING(column) for a column of GROUP BY"
        )
    return _Grouping(scope.dimension(argument, clause="GROUPING()"))


def _not_an_aggregate(node: exp.Expr) -> str:
    text = node.sql(dialect="duckdb")
    if isinstance(node, exp.Max | exp.Min):
        return f"{text}: MIN and MAX are not allowed: each is one respondent's value; use COUNT, SUM or AVG"
    if isinstance(node, exp.AggFunc):
        name = node.sql_name()
        return f"{text}: aggregate {name} is not allowed; the guard answers COUNT, SUM and AVG"
    if isinstance(node, exp.Literal | exp.Boolean | exp.Null):
        return f"constant output {text} is not allowed: select aggregates and grouped dimensions only"
    if isinstance(node, exp.Binary | exp.Unary) and node.find(*_AGGREGATES):
        return (
            f"arithmetic on aggregates ({text}) is not allowed: select the aggregates and "
            "compute with the released values"
        )
    if isinstance(node, exp.Func):
        return (
            f"function {text} is not allowed in the output: select COUNT, SUM or AVG, "
            "and grouped dimension columns"
        )
    return (
        f"non-aggregate output {text} is not allowed: select COUNT, SUM or AVG, and grouped dimension columns"
    )


def _group_by(
    select: exp.Select, scope: _Scope, projections: list[tuple[str, _Item]]
) -> tuple[list[str], tuple[tuple[str, ...], ...]]:
    """The grouping keys, and the grouping sets (``()`` for a plain GROUP BY)."""
    group = select.args.get("group")
    if group is None:
        return [], ()
    if group.args.get("all"):
        return _dedupe([item.name for _, item in projections if isinstance(item, Column)]), ()
    keys, sets = expand_group_by(group, lambda node: _group_key(node, scope, projections).name)
    return list(keys), sets


def _group_key(node: exp.Expr, scope: _Scope, projections: list[tuple[str, _Item]]) -> Column:
    if isinstance(node, exp.Literal) and not node.is_string:
        position = _position(str(node.this))
        if not 1 <= position <= len(projections):
            raise QueryRejected(f"GROUP BY {node.this}: there is no output column at that position")
        item = projections[position - 1][1]
        if isinstance(item, Aggregate):
            raise QueryRejected(f"GROUP BY {node.this} refers to an aggregate: group by dimensions")
        if isinstance(item, _Grouping):
            raise QueryRejected(
                f"GROUP BY {node.this} refers to {item.label}, which is not a column: group by dimensions"
            )
        return item
    if isinstance(node, exp.Column):
        if not node.table and scope.table.column(node.name) is None:
            for name, item in projections:
                if name.lower() == node.name.lower():
                    if isinstance(item, Aggregate):
                        raise QueryRejected(
                            f"GROUP BY {node.name} refers to an aggregate ({item.label}): group by dimensions"
                        )
                    if isinstance(item, _Grouping):
                        raise QueryRejected(
                            f"GROUP BY {node.name} refers to {item.label}, which is not a column: "
                            "group by dimensions"
                        )
                    return item
        return scope.dimension(node, clause="GROUP BY")
    raise QueryRejected(
        f"GROUP BY {node.sql(dialect='duckdb')} is not allowed: group by bare dimension "
        "columns (no functions or arithmetic: they can single out respondents)"
    )


def _where(select: exp.Select, scope: _Scope, limits: Limits) -> tuple[Predicate, ...]:
    where = select.args.get("where")
    if where is None:
        return ()
    predicates = {p.sort_key(): p for p in (_predicate(c, scope, limits) for c in _conjuncts(where.this))}
    return tuple(predicates[key] for key in sorted(predicates))


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    node = node.unnest()
    if isinstance(node, exp.And):
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


def _predicate(node: exp.Expr, scope: _Scope, limits: Limits) -> Predicate:
    if isinstance(node, exp.Or):
        raise QueryRejected(
            "OR is not allowed in WHERE: use column IN (...) for alternatives on one column, "
            "or ask separate queries"
        )
    if isinstance(node, exp.Not):
        inner = node.this.unnest()
        if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
            return Predicate(_bare_dimension(inner.this, scope).name, PredOp.IS_NOT_NULL)
        raise QueryRejected(
            "NOT is not allowed in WHERE: write the condition positively, e.g. with <> or IN (...)"
        )
    if isinstance(node, _PATTERN_MATCH):
        raise QueryRejected(
            "pattern matching (LIKE, GLOB, regular expressions) is not allowed in WHERE: "
            "compare with exact values using = or IN (...)"
        )
    if isinstance(node, exp.Is):
        if not isinstance(node.expression, exp.Null):
            raise QueryRejected("only IS NULL and IS NOT NULL are allowed with IS")
        return Predicate(_bare_dimension(node.this, scope).name, PredOp.IS_NULL)
    if isinstance(node, exp.In):
        if node.args.get("query") is not None or node.args.get("unnest") is not None:
            raise QueryRejected("subqueries are not allowed: list the values, IN ('a', 'b')")
        column = _bare_dimension(node.this, scope)
        if not node.expressions:
            raise QueryRejected(f"{column.name} IN (): list at least one value")
        if len(node.expressions) > limits.max_in_values:
            raise QueryRejected(
                f"IN list has {len(node.expressions)} values; the limit is {limits.max_in_values}"
            )
        values = tuple(sorted({_constant(v, column, scope) for v in node.expressions}, key=_order))
        return Predicate(column.name, PredOp.IN, values)
    if isinstance(node, exp.Between):
        column = _bare_dimension(node.this, scope)
        low = _constant(node.args["low"], column, scope)
        high = _constant(node.args["high"], column, scope)
        if node.args.get("symmetric"):  # BETWEEN SYMMETRIC b AND a is BETWEEN a AND b
            low, high = _ascending(low, high)
        return Predicate(column.name, PredOp.BETWEEN, (low, high))
    op = _COMPARISONS.get(type(node))
    if op is not None:
        assert isinstance(node, exp.Binary)
        left, right = node.left.unnest(), node.right.unnest()
        if _mentions_column(left) and _mentions_column(right):
            raise QueryRejected(
                f"{node.sql(dialect='duckdb')}: compare a column with a constant, not with another column"
            )
        if not _mentions_column(left) and not _mentions_column(right):
            raise QueryRejected(
                f"{node.sql(dialect='duckdb')}: a condition must compare a dimension column with a constant"
            )
        if _mentions_column(right):
            left, right = right, left
            op = _MIRRORED.get(op, op)
        column = _bare_dimension(left, scope)
        return Predicate(column.name, op, (_constant(right, column, scope),))
    if isinstance(node, exp.Column):
        raise QueryRejected(f"WHERE {node.sql()}: write the condition out, e.g. {node.sql()} = true")
    if isinstance(node, exp.Boolean | exp.Literal | exp.Null):
        raise QueryRejected(
            "constant conditions are not allowed in WHERE: compare a dimension with a constant"
        )
    raise QueryRejected(
        f"WHERE {node.sql(dialect='duckdb')} is not allowed: use comparisons (=, <>, <, <=, >, "
        ">=), IN (...), BETWEEN or IS [NOT] NULL of a dimension column with constants, "
        "joined by AND"
    )


def _mentions_column(node: exp.Expr) -> bool:
    return node.find(exp.Column) is not None


def _bare_dimension(node: exp.Expr, scope: _Scope) -> Column:
    node = node.unnest()
    if isinstance(node, exp.Column):
        return scope.dimension(node, clause="WHERE")
    column = node.find(exp.Column)
    if column is not None:
        scope.dimension(column, clause="WHERE")  # identifiers and measures get their own message
    raise QueryRejected(
        f"functions and arithmetic on columns are not allowed in WHERE ({node.sql(dialect='duckdb')}): "
        "they can single out respondents; compare the bare column with a constant"
    )


def _constant(node: exp.Expr, column: Column, scope: _Scope) -> Scalar:
    node = node.unnest()
    value = _literal(node)
    type_name = scope.type_of(column).upper()
    is_numeric = type_name.split("(")[0] in NUMERIC_TYPES
    # bool is an int to Python, not to the engine: `class = true` is not a number
    if is_numeric and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise QueryRejected(
            f"column {column.name!r} is numeric ({type_name}); compare it with a number, "
            f"not {node.sql(dialect='duckdb')}"
        )
    if type_name.startswith(_TEMPORAL_TYPES):
        if isinstance(value, str):
            return _parse_temporal(value, column, type_name)
        if not isinstance(value, dt.date):
            raise QueryRejected(
                f"column {column.name!r} is a {type_name}; compare it with a date such as '2020-01-31'"
            )
        if type_name.startswith("TIMESTAMP") and not isinstance(value, dt.datetime):
            # the engine reads DATE 'd' as midnight of d here; one canonical form for both
            return dt.datetime.combine(value, dt.time())
    elif not is_numeric and type_name == "BOOLEAN":
        if not isinstance(value, bool):
            raise QueryRejected(f"column {column.name!r} is BOOLEAN; compare it with true or false")
    elif not is_numeric and not isinstance(value, str):
        example = value.isoformat() if isinstance(value, dt.date) else node.sql(dialect="duckdb")
        raise QueryRejected(
            f"column {column.name!r} is text ({type_name}); compare it with a quoted string, e.g. '{example}'"
        )
    return value


def _literal(node: exp.Expr) -> Scalar:
    if isinstance(node, exp.Literal):
        if node.is_string:
            return str(node.this)
        return _number(str(node.this))
    if isinstance(node, exp.RawString):  # $$text$$
        return str(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return -_number(str(node.this.this))
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string:
        target = node.to.this.value.upper() if node.to is not None else ""
        if target.startswith(("DATE", "TIMESTAMP")):
            return _parse_temporal(str(node.this.this), None, target)
    if isinstance(node, exp.Null):
        raise QueryRejected("comparisons with NULL are never true: use IS NULL or IS NOT NULL")
    raise QueryRejected(
        f"{node.sql(dialect='duckdb')} is not a plain constant: compare with a literal value "
        "(no functions, arithmetic or casts of columns)"
    )


def _number(text: str) -> int | float:
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise QueryRejected(f"{text!r} is not a number") from None
    if not number.is_finite() or number.adjusted() > 38:
        raise QueryRejected(f"the number {_abbreviated(text)} is out of range: compare with a smaller number")
    # 1980, 1980.0 and 1.98e3 are one value: one canonical form, so re-phrasing a
    # condition cannot make a query look new to the history and the audit.
    if number == number.to_integral_value():
        integer = int(number)
        if abs(integer) <= _MAX_INTEGER:
            return integer
    value = float(number)
    if not math.isfinite(value):
        raise QueryRejected(f"the number {_abbreviated(text)} is out of range: compare with a smaller number")
    return value


def _abbreviated(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:20]}..."


def _parse_temporal(text: str, column: Column | None, type_name: str) -> dt.date | dt.datetime:
    kind = "date" if type_name.startswith("DATE") else "timestamp"
    where = f" for column {column.name!r}" if column else ""
    try:
        value = dt.date.fromisoformat(text) if kind == "date" else dt.datetime.fromisoformat(text)
    except ValueError:
        example = "'2020-01-31'" if kind == "date" else "'2020-01-31 13:45:00'"
        raise QueryRejected(
            f"{text!r} is not a valid {kind}{where}: use ISO format, e.g. {example}"
        ) from None
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        raise QueryRejected(f"{text!r}: time zone offsets are not supported{where}; drop the offset")
    return value


def _ascending(low: Scalar, high: Scalar) -> tuple[Scalar, Scalar]:
    try:
        return (high, low) if high < low else (low, high)  # type: ignore[operator]
    except TypeError:  # a DATE bound against a TIMESTAMP one
        raise QueryRejected(
            "BETWEEN SYMMETRIC needs two bounds of the same type: write both as dates or both as timestamps"
        ) from None


def _order(value: Scalar) -> tuple[str, str]:
    return (type(value).__name__, repr(value))


def _dedupe(names: list[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _order_by(
    select: exp.Select,
    scope: _Scope,
    projections: list[tuple[str, _Item]],
    outputs: list[Output],
) -> tuple[OrderItem, ...]:
    order = select.args.get("order")
    if order is None:
        return ()
    items = []
    for ordered in order.expressions:
        index = _output_index(ordered.this, scope, projections)
        items.append(OrderItem(index, bool(ordered.args.get("desc")), bool(ordered.args.get("nulls_first"))))
    return tuple(items)


def _output_index(node: exp.Expr, scope: _Scope, projections: list[tuple[str, _Item]]) -> int:
    message = (
        f"ORDER BY {node.sql(dialect='duckdb')}: order by an output column (its name, alias or "
        "position); ordering is applied to the protected answer"
    )
    if isinstance(node, exp.Literal) and not node.is_string:
        position = _position(str(node.this))
        if 1 <= position <= len(projections):
            return position - 1
        raise QueryRejected(message)
    if isinstance(node, exp.Column):
        for i, (name, _) in enumerate(projections):
            if name.lower() == node.name.lower() and not node.table:
                return i
        column = scope.column(node, clause="ORDER BY")
        for i, (_, item) in enumerate(projections):
            if isinstance(item, Column) and item.name == column.name:
                return i
        raise QueryRejected(message)
    wanted: _Item | None = None
    if type(node) in _AGGREGATES:
        wanted = _aggregate(node, scope)
    elif isinstance(node, exp.Grouping | exp.GroupingId):
        wanted = _grouping(node, scope)
    for i, (_, item) in enumerate(projections):
        if wanted is not None and item == wanted:
            return i
    raise QueryRejected(message)


def _limit(select: exp.Select) -> tuple[int | None, int]:
    limit = None
    offset = 0
    node = select.args.get("limit")
    if node is not None:
        options = node.args.get("limit_options")
        if options is not None and (options.args.get("percent") or options.args.get("with_ties")):
            raise QueryRejected(
                f"{node.sql(dialect='duckdb').strip()}: PERCENT and WITH TIES are not allowed: "
                "use LIMIT with a whole number of rows"
            )
        if isinstance(node, exp.Fetch):
            limit = _whole_number(node.args.get("count"), "FETCH FIRST")
        else:
            limit = _whole_number(node.expression, "LIMIT")
    node = select.args.get("offset")
    if node is not None:
        offset = _whole_number(node.expression, "OFFSET")
    return limit, offset


def _position(text: str) -> int:
    """A 1-based ordinal as written, or 0 when it is not a plain whole number."""
    return int(text) if _WHOLE_NUMBER.fullmatch(text) else 0


def _whole_number(node: exp.Expr | None, clause: str) -> int:
    if isinstance(node, exp.Literal) and not node.is_string and _WHOLE_NUMBER.fullmatch(str(node.this)):
        return int(node.this)
    text = _abbreviated(node.sql(dialect="duckdb")) if node is not None else ""
    raise QueryRejected(f"{clause} {text}: use a whole number of rows (at most 18 digits)")
