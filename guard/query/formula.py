"""A WHERE clause of AND, OR and NOT over dimension comparisons, as the conjunctive
normal form the rest of the guard reads: a conjunction of conditions, each one
comparison (:class:`~guard.query.shape.Predicate`) or a disjunction of comparisons
(:class:`~guard.query.shape.AnyOf`).

Negations are pushed down to the comparisons by De Morgan's laws, and each negated
comparison is replaced by its positive form (``NOT x IN (a, b)`` is ``x <> a AND x <>
b``, ``NOT x < 5`` is ``x >= 5``, ``NOT x BETWEEN a AND b`` is ``x < a OR x > b``). SQL's
three-valued logic keeps both laws and these forms (a comparison with a NULL column is
unknown on both sides), so the normal form selects exactly the rows the clause does,
NULLs included; ``tests/query/test_or_not.py`` checks it against DuckDB.

Within a disjunction, alternatives ``x IN (...)`` on one column merge into one IN list,
so ``major = 'EE' OR major = 'CS'`` is the single comparison ``major IN ('EE', 'CS')``,
as before OR across columns existed. A disjunction left with more than one comparison is
an :class:`AnyOf`; the front end allows it only where answers are audited on rows
(:func:`guard.query.front.read_query`).

Distributing OR over AND can grow a formula exponentially: the normal form is bounded
(:data:`MAX_CONDITIONS` conjuncts of at most :data:`MAX_ALTERNATIVES` comparisons) and a
larger one is rejected with a message that says how to shorten it.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from guard.errors import QueryRejected
from guard.query.shape import AnyOf, Condition, Predicate, PredOp, Scalar, order_of

__all__ = ["MAX_ALTERNATIVES", "MAX_CONDITIONS", "conditions"]

#: conjuncts of the normal form, and comparisons in one of its disjunctions
MAX_CONDITIONS = 64
MAX_ALTERNATIVES = 64

#: a conjunction of disjunctions of comparisons
Cnf = list[list[Predicate]]

_OPPOSITE = {
    PredOp.LT: PredOp.GE,
    PredOp.LE: PredOp.GT,
    PredOp.GT: PredOp.LE,
    PredOp.GE: PredOp.LT,
    PredOp.IS_NULL: PredOp.IS_NOT_NULL,
    PredOp.IS_NOT_NULL: PredOp.IS_NULL,
}

_TOO_LARGE = (
    "the WHERE condition is too complex: written as AND of OR-alternatives it needs more than "
    f"{MAX_CONDITIONS} conditions of at most {MAX_ALTERNATIVES} comparisons; simplify it, e.g. "
    "list values with IN (...) instead of OR-ing comparisons, or ask separate queries"
)


def conditions(
    node: exp.Expr, atom: Callable[[exp.Expr], Predicate], max_in_values: int
) -> tuple[Condition, ...]:
    """The normal form of the WHERE clause ``node``: its conditions, each once, in
    canonical order. ``atom`` reads one comparison (anything but AND, OR and NOT)."""
    found: dict[str, Condition] = {}
    for clause in _cnf(node, False, atom):
        condition = _merged(clause, max_in_values)
        found.setdefault(condition.sort_key(), condition)
    return tuple(found[key] for key in sorted(found))


def _cnf(node: exp.Expr, negated: bool, atom: Callable[[exp.Expr], Predicate]) -> Cnf:
    node = node.unnest()
    if isinstance(node, exp.Not):
        return _cnf(node.this, not negated, atom)
    if isinstance(node, exp.And | exp.Or):
        left = _cnf(node.left, negated, atom)
        right = _cnf(node.right, negated, atom)
        if isinstance(node, exp.And) != negated:  # AND, or NOT of an OR
            return _bounded(left + right)
        return _distributed(left, right)
    found = atom(node)
    return _negation(found) if negated else [[found]]


def _distributed(left: Cnf, right: Cnf) -> Cnf:
    """(A1 AND A2 ...) OR (B1 AND B2 ...) = AND over all (Ai OR Bj)."""
    if len(left) * len(right) > MAX_CONDITIONS:
        raise QueryRejected(_TOO_LARGE)
    return _bounded([a + b for a in left for b in right])


def _bounded(cnf: Cnf) -> Cnf:
    if len(cnf) > MAX_CONDITIONS or any(len(clause) > MAX_ALTERNATIVES for clause in cnf):
        raise QueryRejected(_TOO_LARGE)
    return cnf


def _negation(predicate: Predicate) -> Cnf:
    """NOT ``predicate`` in positive comparisons (rows where the column is NULL are
    excluded by both, as SQL's unknown)."""
    column, op, values = predicate.column, predicate.op, predicate.values
    if op is PredOp.IN:
        return [[Predicate(column, PredOp.NE, (v,))] for v in values]
    if op is PredOp.NE:
        return [[Predicate(column, PredOp.IN, values)]]
    if op is PredOp.BETWEEN:
        return [[Predicate(column, PredOp.LT, values[:1]), Predicate(column, PredOp.GT, values[1:])]]
    return [[Predicate(column, _OPPOSITE[op], values)]]


def _merged(clause: list[Predicate], max_in_values: int) -> Condition:
    """One disjunction: IN alternatives per column merged into one list, duplicates
    dropped; a single comparison left is that comparison."""
    lists: dict[str, set[Scalar]] = {}
    others: dict[str, Predicate] = {}
    for predicate in clause:
        if predicate.op is PredOp.IN:
            lists.setdefault(predicate.column, set()).update(predicate.values)
        else:
            others.setdefault(predicate.sort_key(), predicate)
    merged = list(others.values())
    for column, values in lists.items():
        if len(values) > max_in_values:
            raise QueryRejected(f"OR lists {len(values)} values of {column}; the limit is {max_in_values}")
        merged.append(Predicate(column, PredOp.IN, tuple(sorted(values, key=order_of))))
    if len(merged) == 1:
        return merged[0]
    return AnyOf(tuple(sorted(merged, key=Predicate.sort_key)))
