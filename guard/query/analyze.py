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

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeAlias

from sqlglot import exp

from guard.errors import QueryRejected
from guard.policy.model import Column, Limits, Role, Table
from guard.query.grouping import expand_group_by
from guard.query.predicates import abbreviated, where_predicates
from guard.query.scope import Scope
from guard.query.shape import (
    AggFunc,
    Aggregate,
    OrderItem,
    Output,
    OutputKind,
    QueryShape,
)

__all__ = ["analyze"]


_AGGREGATES: dict[type[exp.Expr], AggFunc] = {
    exp.Count: AggFunc.COUNT,
    exp.Sum: AggFunc.SUM,
    exp.Avg: AggFunc.AVG,
}
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


def analyze(select: exp.Select, table: Table, types: Mapping[str, str], limits: Limits) -> QueryShape:
    """Interpret a validated SELECT over ``table``.

    ``types`` maps lower-cased column names to the engine's type names.

    Raises:
        QueryRejected: a clause uses a column or construct it may not.
    """
    from_ = select.args.get("from_") or select.args.get("from")
    assert from_ is not None  # validate() guarantees one FROM table
    alias = from_.this.alias or None
    scope = Scope(table, alias, types)
    projections = _projections(select, scope)
    group_by, grouping_sets = _group_by(select, scope, projections)
    predicates = where_predicates(select, scope, limits)

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


def _projections(select: exp.Select, scope: Scope) -> list[tuple[str, _Item]]:
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
            items.append((projection.alias if isinstance(projection, exp.Alias) else "grouping", grouping))
        else:
            aggregate = _aggregate(node, scope)
            # PostgreSQL names an unaliased aggregate after its function: count, sum, avg
            name = projection.alias if isinstance(projection, exp.Alias) else aggregate.func.value
            items.append((name, aggregate))
    return items


def _aggregate(node: exp.Expr, scope: Scope) -> Aggregate:
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


def _grouping(node: exp.Grouping | exp.GroupingId, scope: Scope) -> _Grouping:
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
    select: exp.Select, scope: Scope, projections: list[tuple[str, _Item]]
) -> tuple[list[str], tuple[tuple[str, ...], ...]]:
    """The grouping keys, and the grouping sets (``()`` for a plain GROUP BY)."""
    group = select.args.get("group")
    if group is None:
        return [], ()
    if group.args.get("all"):
        return _dedupe([item.name for _, item in projections if isinstance(item, Column)]), ()
    keys, sets = expand_group_by(group, lambda node: _group_key(node, scope, projections).name)
    return list(keys), sets


def _group_key(node: exp.Expr, scope: Scope, projections: list[tuple[str, _Item]]) -> Column:
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


def _dedupe(names: list[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _order_by(
    select: exp.Select,
    scope: Scope,
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


def _output_index(node: exp.Expr, scope: Scope, projections: list[tuple[str, _Item]]) -> int:
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
        named = [i for i, (name, _) in enumerate(projections) if name.lower() == node.name.lower()]
        if named and not node.table:
            if len({_item_key(projections[i][1]) for i in named}) > 1:
                raise QueryRejected(
                    f"ORDER BY {node.name} is ambiguous: {len(named)} output columns are named "
                    f"{node.name!r}; give them aliases, or order by position"
                )
            return named[0]
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


def _item_key(item: _Item) -> object:
    return item.name if isinstance(item, Column) else item


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
    text = abbreviated(node.sql(dialect="duckdb")) if node is not None else ""
    raise QueryRejected(f"{clause} {text}: use a whole number of rows (at most 18 digits)")
