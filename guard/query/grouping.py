"""GROUP BY, ROLLUP, CUBE and GROUPING SETS, expanded into explicit grouping sets.

Part of stage 3 (:mod:`analyze`): the clause's structure is read here; what a key may
be (a dimension, by name, alias or ordinal) is decided by the ``resolve`` callback.

``GROUP BY a, ROLLUP (b, c)`` is the cross product of its elements: each element is a
list of grouping sets (a plain key is the one set ``(a)``) and the product unites one set
of each. Duplicate sets are dropped: a total released twice is still one total, and
the answer has one row per cell (standard SQL would repeat the rows without DISTINCT).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sqlglot import exp

from guard.errors import QueryRejected

__all__ = ["MAX_GROUPING_KEYS", "MAX_GROUPING_SETS", "expand_group_by"]

#: most grouping sets one query may ask for: each is a full aggregation pass in the
#: engine and a layer of totals the protection stage must keep consistent
MAX_GROUPING_SETS = 64
#: most keys with grouping sets: the grouping id is DuckDB's GROUPING(k1, ..., kn), a
#: 64-bit integer that takes at most 63 arguments
MAX_GROUPING_KEYS = 63

Resolve = Callable[[exp.Expr], str]
_Sets = frozenset[frozenset[str]]


def expand_group_by(
    group: exp.Group, resolve: Resolve
) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """The keys and grouping sets of a GROUP BY clause (not GROUP BY ALL).

    ``resolve`` maps one key as written (column, alias or ordinal) to its column name,
    raising :class:`QueryRejected` when it is not a dimension.

    Returns:
        ``(keys, sets)``: the keys in order of first appearance; ``sets`` is ``()`` for a
        plain GROUP BY (a single grouping set holding every key), else the distinct sets,
        each in key order, longest first and then by key positions.

    Raises:
        QueryRejected: a construct that is not supported, more than
            :data:`MAX_GROUPING_SETS` grouping sets (checked as the expansion grows, so
            an intermediate product over the limit is refused too), or grouping sets
            over more than :data:`MAX_GROUPING_KEYS` keys.
    """
    if group.args.get("rollup") or group.args.get("cube"):
        raise QueryRejected(
            "GROUP BY ... WITH ROLLUP / WITH CUBE is not supported: write GROUP BY ROLLUP (a, b) "
            "or GROUP BY CUBE (a, b)"
        )
    if group.args.get("grouping_sets"):
        raise QueryRejected(
            "GROUP BY a, b GROUPING SETS (...) is not supported: "
            "write GROUP BY GROUPING SETS ((a, b), (a), ())"
        )
    if group.args.get("totals"):
        raise QueryRejected(
            "GROUP BY ... WITH TOTALS is not supported: write GROUP BY ROLLUP (a, b) for totals"
        )
    keys: dict[str, None] = {}  # insertion-ordered set: order of first appearance

    def key(node: exp.Expr) -> str:
        name = resolve(node)
        keys.setdefault(name, None)
        return name

    product: _Sets = frozenset({frozenset()})
    for element in group.expressions:
        product = _checked(_cross(product, _element(element, key)), group)
    if len(product) == 1:
        return tuple(keys), ()
    if len(keys) > MAX_GROUPING_KEYS:
        raise QueryRejected(
            f"ROLLUP / CUBE / GROUPING SETS over {len(keys)} keys: the limit is {MAX_GROUPING_KEYS}; "
            "group by fewer keys"
        )
    order = {name: i for i, name in enumerate(keys)}
    positions = sorted((sorted(order[k] for k in s) for s in product), key=lambda p: (-len(p), p))
    names = list(keys)
    return tuple(keys), tuple(tuple(names[i] for i in p) for p in positions)


def _element(node: exp.Expr, key: Resolve) -> _Sets:
    """The grouping sets of one top-level element of GROUP BY."""
    if isinstance(node, exp.Rollup | exp.Cube | exp.GroupingSets):
        return _sets(node, key)
    if isinstance(node, exp.Tuple) and not node.expressions:
        return frozenset({frozenset()})  # GROUP BY (): the grand total
    return frozenset({frozenset({key(node.unnest())})})


def _sets(node: exp.Rollup | exp.Cube | exp.GroupingSets, key: Resolve) -> _Sets:
    if isinstance(node, exp.GroupingSets):
        found: set[frozenset[str]] = set()
        for element in node.expressions:
            if isinstance(element, exp.Rollup | exp.Cube | exp.GroupingSets):
                found |= _sets(element, key)
            else:
                found.add(_item(element, key))
            _checked(found, node)
        return frozenset(found)
    items = [_item(element, key) for element in node.expressions]
    if isinstance(node, exp.Rollup):  # (a, b, c), (a, b), (a), ()
        return _checked({frozenset().union(*items[:n]) for n in range(len(items) + 1)}, node)
    cube: set[frozenset[str]] = {frozenset()}  # every subset of the items
    for item in items:
        cube |= {s | item for s in cube}
        _checked(cube, node)
    return frozenset(cube)


def _item(node: exp.Expr, key: Resolve) -> frozenset[str]:
    """One item of ROLLUP / CUBE / GROUPING SETS: a key, or a parenthesized list of keys."""
    if isinstance(node, exp.Tuple):
        return frozenset(key(part.unnest()) for part in node.expressions)
    if isinstance(node, exp.Rollup | exp.Cube | exp.GroupingSets):
        raise QueryRejected(
            f"{node.sql(dialect='duckdb')} cannot be nested here: ROLLUP and CUBE take keys or "
            "parenthesized lists of keys; combine them at the top of GROUP BY or in GROUPING SETS"
        )
    return frozenset({key(node.unnest())})


def _cross(left: _Sets, right: Iterable[frozenset[str]]) -> _Sets:
    return frozenset(a | b for a in left for b in right)


def _checked(sets: Iterable[frozenset[str]], node: exp.Expr) -> _Sets:
    """``sets``, unless there are more than the limit. Checked as the expansion grows, so
    that CUBE of many keys is refused before its 2^n sets are built."""
    found = frozenset(sets)
    if len(found) > MAX_GROUPING_SETS:
        text = node.sql(dialect="duckdb")
        text = text if len(text) <= 80 else f"{text[:76]} ..."
        raise QueryRejected(
            f"{text} expands to more than {MAX_GROUPING_SETS} grouping sets: ask for fewer "
            "totals (e.g. ROLLUP instead of CUBE, fewer keys) or split the query"
        )
    return found
