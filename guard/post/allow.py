"""What the outer query of a query over protected answers may contain.

The outer query reads only the inner queries' answers: :func:`check_outer` allows a
listed set of constructs (scalar arithmetic and functions, CASE, casts, comparisons,
aggregates and window functions over the answers' rows), and nothing that names a
file, a catalog, a setting or a table. Deny by default: a function sqlglot does not
know, or one not listed here, is refused. (The outer query runs on an engine holding
nothing but the answers, with external access off: this list is the first wall, not
the only one.)
"""

from __future__ import annotations

from sqlglot import exp

from guard.errors import QueryRejected
from guard.post.outer import ANSWER_PREFIX, source_message

__all__ = ["AGGREGATES", "RANKINGS", "check_outer"]

_STRUCTURE: tuple[type[exp.Expr], ...] = (
    exp.Select,
    exp.Union,
    exp.Subquery,
    exp.From,
    exp.Join,
    exp.Table,
    exp.TableAlias,
    exp.With,
    exp.CTE,
    exp.Where,
    exp.Group,
    exp.Having,
    exp.Qualify,
    exp.Order,
    exp.Ordered,
    exp.Limit,
    exp.Offset,
    exp.Distinct,
    exp.Alias,
    exp.Column,
    exp.Identifier,
    exp.Star,
    exp.Literal,
    exp.Null,
    exp.Boolean,
    exp.Paren,
    exp.DataType,
    exp.DataTypeParam,
    exp.Tuple,
)
_SCALAR: tuple[type[exp.Expr], ...] = (
    exp.Neg,
    exp.Not,
    exp.And,
    exp.Or,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.IntDiv,
    exp.Mod,
    exp.Pow,
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.NullSafeEQ,
    exp.NullSafeNEQ,
    exp.Is,
    exp.In,
    exp.Between,
    exp.Like,
    exp.ILike,
    exp.Case,
    exp.If,
    exp.Coalesce,
    exp.Nullif,
    exp.Cast,
    exp.TryCast,
    exp.Round,
    exp.Abs,
    exp.Floor,
    exp.Ceil,
    exp.Trunc,
    exp.Sqrt,
    exp.Ln,
    exp.Log,
    exp.Exp,
    exp.Sign,
    exp.Greatest,
    exp.Least,
    exp.Concat,
    exp.DPipe,
    exp.Upper,
    exp.Lower,
    exp.Length,
    exp.Substring,
    exp.Left,
    exp.Right,
    exp.Trim,
)
#: aggregates over the answers' rows (in an outer GROUP BY or a window)
AGGREGATES: tuple[type[exp.Expr], ...] = (
    exp.Count,
    exp.CountIf,
    exp.Sum,
    exp.Avg,
    exp.Min,
    exp.Max,
    exp.Median,
    exp.Stddev,
    exp.StddevPop,
    exp.StddevSamp,
    exp.Variance,
    exp.VariancePop,
)
#: window functions over the answers' rows
RANKINGS: tuple[type[exp.Expr], ...] = (
    exp.RowNumber,
    exp.Rank,
    exp.DenseRank,
    exp.PercentRank,
    exp.CumeDist,
    exp.Ntile,
    exp.Lag,
    exp.Lead,
    exp.FirstValue,
    exp.LastValue,
    exp.NthValue,
)
_WINDOWS: tuple[type[exp.Expr], ...] = (exp.Window, exp.WindowSpec)
_ALLOWED = _STRUCTURE + _SCALAR + AGGREGATES + RANKINGS + _WINDOWS


def check_outer(tree: exp.Expr, answers: frozenset[str]) -> None:
    """Refuse anything in the outer query ``tree`` (inner queries already replaced by
    SELECTs over the answer tables ``answers``) that is not a computation on those
    answers.

    Raises:
        QueryRejected: the construct, and what to write instead.
    """
    for node in tree.walk():
        if isinstance(node, exp.Identifier) and "#" in node.name:
            raise QueryRejected(
                f"the name {node.name!r} is not allowed in a query over protected answers: "
                "'#' is reserved for the guard's own columns; choose another name"
            )
        if not isinstance(node, _ALLOWED):
            raise QueryRejected(_not_allowed(node))
        if isinstance(node, exp.Subquery) and not isinstance(node.parent, exp.From | exp.Join):
            raise QueryRejected(
                "subqueries in expressions are not allowed over protected answers: join the "
                "answers, or use a window function (SUM(x) OVER ())"
            )
        if isinstance(node, exp.In) and (node.args.get("query") or node.args.get("unnest")):
            raise QueryRejected("IN (SELECT ...) is not allowed over protected answers: join the answers")
        if isinstance(node, exp.Distinct) and node.args.get("on") is not None:
            raise QueryRejected("DISTINCT ON is not allowed over protected answers: use GROUP BY or a window")
        if isinstance(node, exp.TableAlias) and node.args.get("columns"):
            raise QueryRejected(
                "column aliases on a subquery (AS t(a, b)) are not allowed: alias the columns inside it"
            )
        if isinstance(node, exp.Table):
            _check_table(node, answers)
        if isinstance(node, exp.Limit | exp.Offset):
            amount = node.expression
            if node.args.get("limit_options") is not None or not (
                isinstance(amount, exp.Literal) and not amount.is_string and amount.this.isdigit()
            ):
                raise QueryRejected(f"{node.sql(dialect='duckdb').strip()}: use a whole number of rows")
        if isinstance(node, exp.Qualify) and not node.find(exp.Window):
            raise QueryRejected("QUALIFY filters on window functions: filter on aggregates with HAVING")
        if isinstance(node, exp.CTE) and node.alias.startswith(ANSWER_PREFIX):
            raise QueryRejected(
                f"the name {node.alias!r} is reserved for the guard's answer tables: choose another name"
            )


def _check_table(table: exp.Table, answers: frozenset[str]) -> None:
    if any(table.args.get(k) for k in table.args if k not in ("this", "alias")) or not isinstance(
        table.this, exp.Identifier
    ):
        raise QueryRejected(source_message(table))
    name = table.name
    if name.startswith(ANSWER_PREFIX) and name not in answers:
        raise QueryRejected(source_message(table))


def _not_allowed(node: exp.Expr) -> str:
    text = node.sql(dialect="duckdb")
    if len(text) > 60:
        text = text[:57] + "..."
    if isinstance(node, exp.Func):
        return (
            f"function {text} is not allowed in a query over protected answers: use arithmetic, "
            "ROUND, CAST, CASE, COALESCE, comparisons, and aggregates or window functions over "
            "the answers' rows"
        )
    return (
        f"{text} is not allowed in a query over protected answers: compute with the answers' "
        "columns (arithmetic, ROUND, CAST, CASE, COALESCE, comparisons, aggregates, windows)"
    )
