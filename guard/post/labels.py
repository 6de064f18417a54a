"""Output labels as PostgreSQL gives them to unaliased expressions (its FigureColname):
a column by its name, a function call by the function's name, a cast by what it casts
(or the type), CASE as ``case``, anything else ``?column?``."""

from __future__ import annotations

from sqlglot import exp

__all__ = ["UNNAMED", "label"]

UNNAMED = "?column?"

_NAMED: tuple[tuple[type[exp.Expr], str], ...] = (
    (exp.Case, "case"),
    (exp.If, "case"),  # DuckDB's IF(c, a, b) is a CASE
    (exp.Coalesce, "coalesce"),
    (exp.Nullif, "nullif"),
    (exp.Greatest, "greatest"),
    (exp.Least, "least"),
    (exp.Grouping, "grouping"),
    (exp.Count, "count"),
    (exp.Sum, "sum"),
    (exp.Avg, "avg"),
)


def label(node: exp.Expr) -> str:
    """The label PostgreSQL gives the output ``node``."""
    if isinstance(node, exp.Alias):
        return node.alias
    node = node.unnest()
    if isinstance(node, exp.Column):
        return node.name
    if isinstance(node, exp.Window):
        return label(node.this)
    if isinstance(node, exp.Filter):
        return label(node.this)
    if isinstance(node, exp.Cast):
        inner = label(node.this)
        return inner if inner != UNNAMED else node.to.sql(dialect="postgres").split("(")[0].lower()
    for klass, name in _NAMED:
        if isinstance(node, klass):
            return name
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return UNNAMED
