"""Flags through the outer query: every value it outputs carries a level, the highest of
the cells it was computed from (0 released, 1 noised, 2 withheld).

Each answer table holds, beside each aggregate column ``c``, a column ``"c#level"``.
:func:`grade` rewrites the outer query (already qualified: every column names its
source) so that every SELECT outputs, beside each output, that output's level, and a
value whose level is 2 is NULL. The lineage is conservative:

- a scalar expression has the highest level of the columns it reads in its row (so
  ``COALESCE(withheld, 0)``, ``withheld IS NULL`` or ``FALSE AND withheld`` are withheld,
  not a released 0 or FALSE);
- an aggregate has the highest level of the rows of its group; a window function the
  highest of its arguments and ordering over its whole partition (whatever the frame),
  and of any row's partition key;
- in a grouped SELECT, every output of a group also carries the level of the group's
  keys and of its rows' filter conditions, and a group key withheld anywhere withholds
  every group (a row with an unknown key might belong to any of them);
- a row whose filter (WHERE, JOIN ON, HAVING, QUALIFY) is withheld is dropped, as a
  NULL condition drops it; in a grouped SELECT it is kept and withholds its group, so an
  aggregate never comes out complete-looking over rows an unknown filter removed;
- ORDER BY orders by the values with withheld ones as NULL.

None of this is what protects the data — the outer query only ever reads protected
answers, in which a withheld cell is NULL — it is what keeps the flags true.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sqlglot import exp

from guard.errors import QueryRejected
from guard.post.allow import AGGREGATES
from guard.post.outer import sources

__all__ = ["LEVEL_SUFFIX", "NOISED", "RELEASED", "SUPPRESSED", "Graded", "grade"]

LEVEL_SUFFIX = "#level"
RELEASED, NOISED, SUPPRESSED = 0, 1, 2

#: a level expression; None when the value is released whatever the data
_Level = exp.Expr | None
#: per source alias (lower-cased): per column (lower-cased), whether it has a level column
_Env = Mapping[str, Mapping[str, bool]]


@dataclass(frozen=True)
class Graded:
    """The outer query's output names and, for each, whether it can be anything but
    released (the columns that hold values computed from aggregates)."""

    names: tuple[str, ...]
    graded: tuple[bool, ...]


def grade(tree: exp.Query, answers: _Env) -> Graded:
    """Rewrite ``tree`` in place so that each SELECT also outputs its outputs' levels
    (after them, in order) and withholds values of level 2.

    ``answers``: per answer table, which of its columns have a ``#level`` column.

    Raises:
        QueryRejected: a construct whose lineage cannot be followed (named windows).
    """
    outputs = _query(tree, answers, {})
    return Graded(tuple(n for n, _ in outputs), tuple(g for _, g in outputs))


def _query(query: exp.Expr, answers: _Env, ctes: _Env) -> list[tuple[str, bool]]:
    with_ = query.args.get("with_")
    if with_ is not None:
        scoped = dict(ctes)
        for cte in with_.expressions:
            scoped[cte.alias.lower()] = {n.lower(): g for n, g in _query(cte.this, answers, scoped)}
        ctes = scoped
    if isinstance(query, exp.Subquery):
        return _query(query.this, answers, ctes)
    if isinstance(query, exp.Union):
        left = _query(query.left, answers, ctes)
        right = _query(query.right, answers, ctes)
        return [(name, a or b) for (name, a), (_, b) in zip(left, right, strict=False)]
    assert isinstance(query, exp.Select)
    return _Select(query, answers, ctes).grade()


def _greatest(levels: Iterable[_Level]) -> _Level:
    present = [level for level in levels if level is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]
    # DuckDB's GREATEST skips NULLs (sqlglot's Greatest would be written NULL-strict)
    return exp.Anonymous(this="GREATEST", expressions=present)


def _known(level: exp.Expr) -> exp.Expr:
    """The level as a number (a NULL level — the missing side of an outer join, an
    empty group — is a NULL value, released)."""
    return exp.func("COALESCE", level.copy(), exp.Literal.number(RELEASED))


def _withheld(level: exp.Expr) -> exp.Expr:
    return exp.GTE(this=_known(level), expression=exp.Literal.number(SUPPRESSED))


def _masked(value: exp.Expr, level: _Level) -> exp.Expr:
    if level is None:
        return value
    return exp.Case(ifs=[exp.If(this=_withheld(level), true=exp.null())], default=value)


def _max(level: _Level) -> _Level:
    return None if level is None else exp.Max(this=level)


class _Select:
    """Grades one SELECT whose sources are answers, CTEs or graded subqueries."""

    def __init__(self, select: exp.Select, answers: _Env, ctes: _Env) -> None:
        self.select = select
        self.env: dict[str, Mapping[str, bool]] = {}
        for source in sources(select):
            alias = source.alias_or_name.lower()
            if isinstance(source, exp.Subquery):
                self.env[alias] = {n.lower(): g for n, g in _query(source.this, answers, ctes)}
            else:
                name = source.name.lower()
                self.env[alias] = ctes[name] if name in ctes else answers[name]
        self.aliases = {p.alias.lower(): p.this for p in select.expressions if isinstance(p, exp.Alias)}
        self.row_extra: _Level = None
        self.group_extra: _Level = None
        self.grouped = select.args.get("group") is not None or any(
            _is_aggregate(node) for part in self._computed() for node in part.walk()
        )

    def _computed(self) -> list[exp.Expr]:
        select = self.select
        parts: list[exp.Expr] = list(select.expressions)
        parts += [select.args[k] for k in ("having", "order") if select.args.get(k) is not None]
        return parts

    def grade(self) -> list[tuple[str, bool]]:
        select = self.select
        if select.args.get("windows"):
            raise QueryRejected(
                "named windows (WINDOW w AS ...) are not supported over protected answers: write "
                "the window in OVER (...)"
            )
        self._check_joins()
        self.row_extra, self.group_extra = self._filters()
        for clause in ("having", "qualify"):
            holder = select.args.get(clause)
            if holder is None:
                continue
            level = self.output_level(holder.this)
            if level is not None:  # an unknown condition drops the row (group), as NULL does
                holder.set("this", exp.and_(exp.paren(holder.this), exp.not_(_withheld(level))))
            # the rows kept by a noised condition are noised (the others are gone)
            self.row_extra = _greatest([self.row_extra, level])
        outputs: list[tuple[str, bool]] = []
        companions: list[exp.Expr] = []
        for projection in list(select.expressions):
            if not isinstance(projection, exp.Alias):
                text = projection.sql(dialect="duckdb")[:60]
                raise QueryRejected(f"cannot follow the output {text}: give it an alias")
            level = self.output_level(projection.this)
            name = projection.alias
            companion = exp.Literal.number(RELEASED) if level is None else _known(level)
            companions.append(exp.alias_(companion, name + LEVEL_SUFFIX, quoted=True))
            projection.set("this", _masked(projection.this, level))
            outputs.append((name, level is not None))
        order = select.args.get("order")
        if order is not None:
            for ordered in order.expressions:
                key = ordered.this
                if (isinstance(key, exp.Column) and not key.table) or isinstance(key, exp.Literal):
                    continue  # an output, already withheld where it must be
                ordered.set("this", _masked(key, self.output_level(key)))
        select.set("expressions", [*select.expressions, *companions])
        return outputs

    def output_level(self, node: exp.Expr) -> _Level:
        """The level of an output (or HAVING, QUALIFY, ORDER BY) of this SELECT: its own,
        the row filters' (noised rows), and in a grouped SELECT, for what aggregates,
        the level of its group's completeness."""
        computed = self.grouped and any(_is_aggregate(n) or isinstance(n, exp.Window) for n in node.walk())
        extras = [self.row_extra, self.group_extra if computed else None]
        return _greatest([self.level(node, self.grouped), *extras])

    def _check_joins(self) -> None:
        """Refuse the joins whose effect on a row the levels cannot follow: a join on
        columns it does not name (NATURAL, POSITIONAL, ASOF), and an outer or anti join
        on values that may be withheld (a row without a match there would come out
        looking released)."""
        for join in self.select.args.get("joins") or []:
            method = str(join.args.get("method") or "").upper()
            if method:
                raise QueryRejected(
                    f"{method} JOIN is not supported over protected answers: join with ON on the group keys"
                )
            using = [i.name.lower() for i in join.args.get("using") or []]
            if any(env.get(name) for env in self.env.values() for name in using):
                raise QueryRejected(
                    "JOIN ... USING a column computed from aggregates is not supported over protected "
                    "answers: join on the group keys"
                )
            outer = join.args.get("side") or str(join.args.get("kind") or "").upper() == "ANTI"
            condition = join.args.get("on")
            if outer and condition is not None and self.level(condition, False) is not None:
                raise QueryRejected(
                    "an outer or anti join on values computed from aggregates is not supported over "
                    "protected answers (a withheld value would leave a row unmatched that looks "
                    "released): join on the group keys, or use an inner join"
                )

    def _filters(self) -> tuple[_Level, _Level]:
        """Apply the row filters (JOIN ON, WHERE). Returns the level they add to every
        output, and in a grouped SELECT the level of each group's completeness (a row an
        unknown filter might have dropped, a key withheld anywhere), which every value
        computed by an aggregate carries."""
        select = self.select
        conditions: list[tuple[exp.Expr, str]] = [
            (join, "on") for join in select.args.get("joins") or [] if join.args.get("on") is not None
        ]
        if select.args.get("where") is not None:
            conditions.append((select.args["where"], "this"))
        levels: list[_Level] = []
        for holder, key in conditions:
            condition = holder.args[key]
            level = self.level(condition, False)
            if level is None:
                continue
            levels.append(level)
            if self.grouped:  # kept, and withholds its group (below)
                holder.set(key, exp.or_(exp.paren(condition), _withheld(level)))
            else:  # an unknown condition drops the row, as NULL does
                holder.set(key, exp.and_(exp.paren(condition), exp.not_(_withheld(level))))
        row = _greatest(levels)
        if not self.grouped:
            return row, None
        keys: list[_Level] = []
        group = select.args.get("group")
        if group is not None:
            keys = [self.level(column, False) for column in group.find_all(exp.Column)]
        keyed = _greatest(keys)
        anywhere = None if keyed is None else exp.Window(this=exp.Max(this=exp.Max(this=keyed.copy())))
        return None, _greatest([_max(row), _max(keyed), anywhere])

    def level(self, node: exp.Expr, grouped: bool) -> _Level:
        """The level of ``node``; ``grouped``: outside every aggregate of a grouped
        SELECT (where a row's level must be aggregated over its group)."""
        if isinstance(node, exp.Column):
            return self._column(node, grouped)
        if isinstance(node, exp.Window):
            return self._window(node, grouped)
        if _is_aggregate(node):
            return _max(_greatest(self.level(child, False) for child in node.iter_expressions()))
        if isinstance(node, exp.Literal | exp.Null | exp.Boolean | exp.Star | exp.DataType):
            return None
        return _greatest(self.level(child, grouped) for child in node.iter_expressions())

    def _column(self, column: exp.Column, grouped: bool) -> _Level:
        if not column.table:
            named = self.aliases.get(column.name.lower())
            if named is None:
                raise QueryRejected(
                    f"column {column.name!r} is not a column of the protected answers this query reads"
                )
            return self.level(named, grouped)
        if not self.env.get(column.table.lower(), {}).get(column.name.lower(), False):
            return None
        level = exp.column(column.name + LEVEL_SUFFIX, table=column.table, quoted=True)
        return exp.Max(this=level) if grouped else level

    def _window(self, window: exp.Window, grouped: bool) -> _Level:
        if window.args.get("alias") is not None:
            raise QueryRejected(
                "named windows (OVER w) are not supported over protected answers: write the "
                "window in OVER (...)"
            )
        partition = list(window.args.get("partition_by") or [])
        order = window.args.get("order")
        function = window.this
        arguments = _greatest(self.level(child, grouped) for child in function.iter_expressions())
        ordering = _greatest(self.level(o.this, grouped) for o in order.expressions) if order else None
        partitioned = _greatest(self.level(p, grouped) for p in partition)
        read = _greatest([arguments, ordering, partitioned])
        over_partition = (
            None
            if read is None
            else exp.Window(this=exp.Max(this=read), partition_by=[p.copy() for p in partition] or None)
        )
        anywhere = None if partitioned is None else exp.Window(this=exp.Max(this=partitioned.copy()))
        return _greatest([over_partition, anywhere])


def _is_aggregate(node: exp.Expr) -> bool:
    """An aggregate over the rows of the SELECT it is in (not a window's function)."""
    windowed = isinstance(node.parent, exp.Window) and node.arg_key == "this"
    return isinstance(node, AGGREGATES) and not windowed
