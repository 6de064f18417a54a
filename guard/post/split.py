"""Decompose one SELECT over a declared table into the plain aggregate query it reads
and the computation on top of that query's answer.

``SELECT major, ROUND(AVG(income), -3) FROM students GROUP BY major HAVING COUNT(*) > 10``
reads the rows once, through the plain query

    SELECT major AS _k0, AVG(income) AS _a0, COUNT(*) AS _a1 FROM students GROUP BY major

(every distinct aggregate once, as a hidden output), and computes the rest from its
protected answer: ``SELECT _k0 AS major, ROUND(_a0, -3) AS round FROM _q0 WHERE _a1 > 10``.
The plain query is asked like any other (``guard.query.front.read_query`` judges it,
with its own messages); nothing but the aggregates' units and the grouping keys crosses
from one to the other.

An aggregate is a *row aggregate* (it reads rows: it goes to the plain query, whole,
arguments and FILTER included, so ``SUM(CASE WHEN x > 5 THEN 1 END)`` is judged there and
refused as before) unless it is the function of a window (``SUM(COUNT(*)) OVER ()`` sums
the answer's counts: a window over the answer's rows).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sqlglot import exp

from guard.errors import QueryRejected
from guard.post.labels import label
from guard.post.outer import aggregate_units, sources

__all__ = ["Split", "row_aggregates", "split_select"]

#: the clauses that the plain query answers; the others are computed on its answer
_INNER_CLAUSES = frozenset({"from", "from_", "joins", "where", "group", "with", "with_"})


@dataclass(frozen=True)
class Split:
    """The plain aggregate query and the SELECT computed on its answer, which reads it
    as the table named when splitting."""

    inner: exp.Select
    outer: exp.Select
    #: columns read outside every aggregate that are not grouping keys: the plain query
    #: outputs them too, so that it refuses them in its own words (an identifier, a
    #: measure, a column not grouped by)
    stray: tuple[str, ...] = ()


def _computed(select: exp.Select) -> Iterator[exp.Expr]:
    """The parts of ``select`` computed on the answer (outputs, HAVING, QUALIFY, ORDER BY,
    named windows)."""
    for key, value in select.args.items():
        if key in _INNER_CLAUSES or value is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, exp.Expr):
                yield item


def row_aggregates(select: exp.Select) -> list[exp.Expr]:
    """Every row aggregate (and GROUPING()) that ``select`` computes with."""
    return [unit for part in _computed(select) for unit in aggregate_units(part)]


def split_select(select: exp.Select, answer: str, columns: frozenset[str]) -> Split:
    """Split ``select`` (one FROM table, no join) into the plain query and the SELECT
    over its answer, which reads it as the table ``answer``.

    ``columns``: the lower-cased column names of the table read (an unqualified name in
    GROUP BY that is not one of them may be an output's alias, as in DuckDB).

    Raises:
        QueryRejected: SELECT *.
    """
    projections = list(select.expressions)
    if any(isinstance(p, exp.Star) or (isinstance(p, exp.Column) and p.is_star) for p in projections):
        raise QueryRejected(
            "SELECT * is not allowed: select aggregates such as COUNT(*), SUM(measure), "
            "AVG(measure), optionally grouped by dimension columns"
        )
    group = _resolved_group(select, projections, columns)
    keys: dict[str, exp.Column] = {}
    if group is not None:
        for column in group.find_all(exp.Column):
            keys.setdefault(column.name.lower(), column)
    key_names = {name: f"_k{i}" for i, name in enumerate(keys)}

    written = select.args.get("from_") or select.args.get("from")
    assert isinstance(written, exp.From) and isinstance(written.this, exp.Table)
    outer = select.copy()
    source = sources(outer)[0]
    assert isinstance(source, exp.Table)
    alias = source.alias or source.name
    for projection in outer.expressions:
        if not isinstance(projection, exp.Alias):
            projection.replace(exp.alias_(projection.copy(), label(projection), quoted=True))

    aggregates: dict[str, str] = {}
    placed: set[int] = set()  # the hidden columns put in place of aggregates
    inner_outputs: list[exp.Expr] = [
        exp.alias_(column.copy(), key_names[name], quoted=True) for name, column in keys.items()
    ]
    for unit in row_aggregates(outer):
        text = unit.sql(dialect="duckdb")
        if text not in aggregates:
            aggregates[text] = f"_a{len(aggregates)}"
            inner_outputs.append(exp.alias_(unit.copy(), aggregates[text], quoted=True))
        hidden_aggregate = exp.column(aggregates[text], table=alias, quoted=True)
        placed.add(id(hidden_aggregate))
        unit.replace(hidden_aggregate)

    stray: list[str] = []
    output_names = {p.alias.lower() for p in outer.expressions if isinstance(p, exp.Alias)}
    for part in list(_computed(outer)):
        for column in list(part.find_all(exp.Column)):
            if id(column) in placed:
                continue  # a hidden aggregate put there above
            if not column.table and column.name.lower() in output_names and _refers_to_output(column):
                continue  # ORDER BY / HAVING naming an output, read from the outer SELECT
            name = column.name.lower()
            if name not in key_names or (column.table and column.table.lower() != alias.lower()):
                hidden = f"_x{len(stray)}"
                stray.append(column.sql(dialect="duckdb"))
                inner_outputs.append(exp.alias_(column.copy(), hidden, quoted=True))
                column.replace(exp.column(hidden, table=alias, quoted=True))
                continue
            column.replace(exp.column(key_names[name], table=alias, quoted=True))

    inner = exp.Select(expressions=inner_outputs)
    inner.set("from_", written.copy())
    if select.args.get("where") is not None:
        inner.set("where", select.args["where"].copy())
    if group is not None:
        inner.set("group", group)

    having = outer.args.get("having")
    for key in ("where", "group", "having", "joins"):
        outer.set(key, None)
    if having is not None:
        outer.set("where", exp.Where(this=having.this))
    source.set("this", exp.to_identifier(answer, quoted=True))
    source.set("db", None)
    source.set("catalog", None)
    source.set("alias", exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))
    return Split(inner, outer, tuple(stray))


def _refers_to_output(column: exp.Column) -> bool:
    """An unqualified name in ORDER BY or HAVING may name an output column."""
    return column.find_ancestor(exp.Order, exp.Having, exp.Qualify) is not None


def _resolved_group(
    select: exp.Select, projections: list[exp.Expr], columns: frozenset[str]
) -> exp.Group | None:
    """GROUP BY with positions, output aliases and ALL replaced by the expressions they
    stand for, so that the plain query groups by what the text meant."""
    group = select.args.get("group")
    if group is None:
        return None
    group = exp.Group(**{k: v for k, v in group.copy().args.items()})
    if group.args.get("all"):
        plain = [p for p in projections if not list(aggregate_units(p)) and not p.find(exp.Window)]
        items = [p.unalias().copy() for p in plain]
        return exp.Group(expressions=[i for i in items if i.find(exp.Column)])

    def resolve(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
            position = int(node.this)
            if 1 <= position <= len(projections):
                found: exp.Expr = projections[position - 1].unalias().copy()
                return found
        if isinstance(node, exp.Column) and not node.table and node.name.lower() not in columns:
            for projection in projections:
                if isinstance(projection, exp.Alias) and projection.alias.lower() == node.name.lower():
                    aliased: exp.Expr = projection.this.copy()
                    return aliased
        return node

    for node in list(group.iter_expressions()):
        _resolve_within(node, resolve)
    return group


def _resolve_within(node: exp.Expr, resolve: object) -> None:
    """Apply ``resolve`` to ``node`` and to the items of ROLLUP / CUBE / GROUPING SETS."""
    assert callable(resolve)
    if isinstance(node, exp.Rollup | exp.Cube | exp.GroupingSets | exp.Tuple):
        for child in list(node.iter_expressions()):
            _resolve_within(child, resolve)
        return
    resolved = resolve(node)
    if resolved is not node:
        node.replace(resolved)
