"""Stage 3's reading of WHERE: plain comparisons between one dimension and constants,
normalized into :class:`~guard.query.shape.Predicate` values (so that re-phrasings
select the same rows and read the same way in the log), joined by AND, OR and NOT into
the normal form of :mod:`guard.query.formula`.

Only dimensions may be compared, and only with constants: a predicate on a measure would
make a refusal a function of confidential values (its refusal bit would leak them).
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from guard.engines import NUMERIC_TYPES
from guard.errors import QueryRejected
from guard.policy.model import Column, Limits
from guard.query.formula import conditions
from guard.query.scope import Scope
from guard.query.shape import Condition, Predicate, PredOp, Scalar, order_of

__all__ = ["abbreviated", "where_predicates"]

_TEMPORAL_TYPES = ("DATE", "TIMESTAMP", "TIME")

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


def where_predicates(select: exp.Select, scope: Scope, limits: Limits) -> tuple[Condition, ...]:
    """The WHERE clause as a conjunction of conditions (:mod:`guard.query.formula`)."""
    where = select.args.get("where")
    if where is None:
        return ()
    return conditions(where.this, lambda node: _predicate(node, scope, limits), limits.max_in_values)


def _predicate(node: exp.Expr, scope: Scope, limits: Limits) -> Predicate:
    """One comparison (AND, OR and NOT are read by :func:`conditions`)."""
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
        values = tuple(sorted({_constant(v, column, scope) for v in node.expressions}, key=order_of))
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
        "joined by AND, OR and NOT"
    )


def _mentions_column(node: exp.Expr) -> bool:
    return node.find(exp.Column) is not None


def _bare_dimension(node: exp.Expr, scope: Scope) -> Column:
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


def _constant(node: exp.Expr, column: Column, scope: Scope) -> Scalar:
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
        raise QueryRejected(f"the number {abbreviated(text)} is out of range: compare with a smaller number")
    # 1980, 1980.0 and 1.98e3 are one value: one canonical form, so re-phrasing a
    # condition cannot make a query look new to the history and the audit.
    if number == number.to_integral_value():
        integer = int(number)
        if abs(integer) <= _MAX_INTEGER:
            return integer
    value = float(number)
    if not math.isfinite(value):
        raise QueryRejected(f"the number {abbreviated(text)} is out of range: compare with a smaller number")
    return value


def abbreviated(text: str) -> str:
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
