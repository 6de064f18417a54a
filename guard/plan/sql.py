"""SQL building blocks shared by every generated query (cell queries, noisy queries,
the audit's query sets): quoted columns, WHERE from normalized predicates, grouping
sets and the grouping id, spelled as the engine's declared capabilities require."""

from __future__ import annotations

from sqlglot import exp

from guard.backends.base import DUCKDB_CAPABILITIES, Capabilities
from guard.query.shape import AnyOf, Condition, Predicate, PredOp, QueryShape

__all__ = ["GID", "column", "condition", "distinct_sets", "grouping_id", "grouping_sets", "where"]

_COMPARE: dict[PredOp, type[exp.Binary]] = {
    PredOp.NE: exp.NEQ,
    PredOp.LT: exp.LT,
    PredOp.LE: exp.LTE,
    PredOp.GT: exp.GT,
    PredOp.GE: exp.GTE,
}

GID = "__gid"


def column(name: str) -> exp.Column:
    return exp.column(name, quoted=True)


def grouping_id(shape: QueryShape, capabilities: Capabilities = DUCKDB_CAPABILITIES) -> exp.Expr:
    """The grouping bitmask of a row, aliased ``GID``: one bit per GROUP BY key, the
    first key the most significant, set when the row's grouping set rolls the key up
    (standard ``GROUPING(k1, ..., kn)``). For engines whose GROUPING() takes one key
    (``capabilities.single_key_grouping``) the same mask as a sum of one-key terms."""
    keys: list[exp.Expr] = [column(k) for k in shape.group_by]
    if not capabilities.single_key_grouping or len(keys) < 2:
        return exp.alias_(exp.Grouping(expressions=keys), GID, quoted=True)
    bits = [exp.Grouping(expressions=[key]) * (1 << (len(keys) - 1 - i)) for i, key in enumerate(keys)]
    total: exp.Expr = bits[0]
    for bit in bits[1:]:
        total = exp.Add(this=total, expression=bit)
    return exp.alias_(exp.Paren(this=total), GID, quoted=True)


def distinct_sets(shape: QueryShape) -> tuple[tuple[str, ...], ...]:
    """The shape's grouping sets, each once (as a set of keys): a repeated set would
    repeat its rows. () when there are none, or no keys to roll up."""
    if not shape.group_by:
        return ()
    distinct: dict[frozenset[str], tuple[str, ...]] = {}
    for keys in shape.grouping_sets:
        unknown = [k for k in keys if k not in shape.group_by]
        if unknown:
            raise ValueError(f"grouping set {keys} names keys not in group_by {shape.group_by}: {unknown}")
        distinct.setdefault(frozenset(keys), keys)
    return tuple(distinct.values())


def grouping_sets(sets: tuple[tuple[str, ...], ...], *extra: str) -> exp.GroupingSets:
    return exp.GroupingSets(
        expressions=[exp.Tuple(expressions=[column(k) for k in (*keys, *extra)]) for keys in sets]
    )


def where(predicates: tuple[Condition, ...]) -> exp.Expr | None:
    conditions = [_conjunct(p) for p in predicates]
    return exp.and_(*conditions) if conditions else None


def _conjunct(item: Condition) -> exp.Expr:
    if isinstance(item, AnyOf):
        return exp.Paren(this=exp.or_(*[condition(p) for p in item.alternatives]))
    return condition(item)


def condition(predicate: Predicate) -> exp.Expr:
    target = column(predicate.column)
    values = [exp.convert(v) for v in predicate.values]
    if predicate.op is PredOp.IN:
        if len(values) == 1:
            return exp.EQ(this=target, expression=values[0])
        return exp.In(this=target, expressions=values)
    if predicate.op is PredOp.BETWEEN:
        return exp.Between(this=target, low=values[0], high=values[1])
    if predicate.op is PredOp.IS_NULL:
        return exp.Is(this=target, expression=exp.Null())
    if predicate.op is PredOp.IS_NOT_NULL:
        return exp.Not(this=exp.Is(this=target, expression=exp.Null()))
    return _COMPARE[predicate.op](this=target, expression=values[0])
