"""Random outer queries over one answer ``t`` with keys ``k``, ``m`` and aggregates ``n``,
``s``, ``a`` (any of which may be withheld): arithmetic, COALESCE, NULLIF, CASE,
comparisons, boolean logic, aggregates and window functions. The text keeps ``{source}``
where the answer is read, so one query runs on the guard (over its inner query) and on
a plain DuckDB table (the oracle)."""

from __future__ import annotations

from hypothesis import strategies as st

#: the inner query whose answer ``t`` is: two keys, three aggregates
INNER = (
    "SELECT sex AS k, major AS m, COUNT(*) AS n, SUM(income) AS s, AVG(income) AS a "
    "FROM students GROUP BY sex, major"
)
AGGREGATES = ("n", "s", "a")

_LITERAL = st.integers(-3, 3).map(str)


def numeric(depth: int) -> st.SearchStrategy[str]:
    leaf = st.sampled_from(AGGREGATES) | _LITERAL
    if depth == 0:
        return leaf
    sub = numeric(depth - 1)
    cond = condition(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(sub, st.sampled_from(["+", "-", "*"]), sub).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(sub, _LITERAL).map(lambda t: f"COALESCE({t[0]}, {t[1]})"),
        st.tuples(sub, _LITERAL).map(lambda t: f"NULLIF({t[0]}, {t[1]})"),
        st.tuples(cond, sub, sub).map(lambda t: f"CASE WHEN {t[0]} THEN {t[1]} ELSE {t[2]} END"),
        sub.map(lambda e: f"ROUND({e}, -1)"),
        sub.map(lambda e: f"ABS({e})"),
        st.tuples(sub, sub).map(lambda t: f"GREATEST({t[0]}, {t[1]})"),
        cond.map(lambda c: f"CAST({c} AS INTEGER)"),
    )


def condition(depth: int) -> st.SearchStrategy[str]:
    sub = numeric(depth)
    base = st.one_of(
        st.tuples(sub, st.sampled_from([">", "=", "<="]), sub).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
        sub.map(lambda e: f"{e} IS NULL"),
        sub.map(lambda e: f"{e} IS NOT NULL"),
        st.just("k = 'Female'"),
    )
    if depth == 0:
        return base
    inner = condition(depth - 1)
    return st.one_of(
        base,
        st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        inner.map(lambda c: f"NOT ({c})"),
    )


_WINDOWS = (
    "SUM({e}) OVER ()",
    "SUM({e}) OVER (PARTITION BY k)",
    "MAX({e}) OVER (PARTITION BY k ORDER BY m)",
    "COUNT({e}) OVER ()",
    "RANK() OVER (ORDER BY {e})",
    "LAG({e}) OVER (ORDER BY k, m)",
    "{e} - AVG({e}) OVER (PARTITION BY m)",
)


@st.composite
def outer_queries(draw: st.DrawFn) -> tuple[str, bool]:
    """(query text with ``{source}``, whether its rows are grouped by ``k`` alone)."""
    e = draw(numeric(2))
    form = draw(st.sampled_from(["row", "window", "filtered", "grouped", "grouped_filtered"]))
    if form == "row":
        return f"SELECT k, m, {e} AS out FROM {{source}} ORDER BY k, m", False
    if form == "window":
        window = draw(st.sampled_from(_WINDOWS)).format(e=e)
        return f"SELECT k, m, {window} AS out FROM {{source}} ORDER BY k, m", False
    if form == "filtered":
        c = draw(condition(1))
        return f"SELECT k, m, {e} AS out FROM {{source}} WHERE {c} ORDER BY k, m", False
    aggregate = draw(st.sampled_from(["SUM({e})", "COUNT({e})", "MAX({e})", "COUNT(*)"])).format(e=e)
    if form == "grouped":
        return f"SELECT k, {aggregate} AS out FROM {{source}} GROUP BY k ORDER BY k", True
    c = draw(condition(1))
    return f"SELECT k, {aggregate} AS out FROM {{source}} WHERE {c} GROUP BY k ORDER BY k", True
