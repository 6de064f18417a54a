"""The query sets of a logged query's cells, read from the guard's backend.

A logged SQL text goes through the guard's own pipeline (parse, validate, analyze), so
a query the guard would reject is not replayable, and re-phrasings (``x IN ('a')``,
swapped conjuncts) select the same rows. Then ONE backend query per entry returns, per
cell of every grouping level, the sorted ``_rid`` lists of its query sets:

- COUNT(*): the selected rows, in the ``count`` space;
- COUNT(col): the selected rows where ``col`` is not NULL, in the ``count`` space;
- SUM(m) and AVG(m): the selected rows where ``m`` is not NULL, in the ``sum(m)``
  space. AVG is audited as the SUM on the same query set: with its count known (the
  count of a set of public dimension values is computable) that is exact, otherwise
  conservative.

A derivable COUNT of a group of fewer than k respondents is a frequency disclosure
(it tells how many respondents share some public values), hence the count space.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from sqlglot import exp

from guard.audit.answers import CellKey, normalized, published_cells
from guard.audit.logsource import LogEntry
from guard.audit.rowsets import RowIds
from guard.backends.base import Backend
from guard.policy.model import Policy, Role
from guard.query.analyze import analyze
from guard.query.parse import parse
from guard.query.rewrite import _where
from guard.query.shape import AggFunc, QueryShape, Scalar
from guard.query.validate import validate

__all__ = ["COUNT_SPACE", "DESCRIBE_LIMIT", "CellSet", "EntryCells", "GuardCells", "space_of"]

COUNT_SPACE = "count"
#: atoms with more rows are not described by their dimension values (one IN list each)
DESCRIBE_LIMIT = 1_000

_GID = "__gid"


@dataclass(frozen=True, eq=False)
class CellSet:
    """One released statistic's query set: ``space`` names its auditor, ``label`` its cell."""

    space: str
    label: str
    rows: RowIds
    #: indexes into the query's aggregates that read this query set
    aggregates: frozenset[int] = frozenset()


@dataclass(frozen=True, eq=False)
class EntryCells:
    """The released query sets of one log entry, on ``table`` at ``data_version``."""

    table: str
    data_version: str
    cells: tuple[CellSet, ...]
    notes: tuple[str, ...] = ()


def space_of(func: AggFunc, column: str | None) -> tuple[str, str | None]:
    """(auditor space, column whose non-NULL rows form the query set; None: every row)."""
    if func is AggFunc.COUNT:
        return COUNT_SPACE, column
    return f"sum({column})", column


class GuardCells:
    """Reads cells' query sets through a policy's pipeline and backend (read-only)."""

    def __init__(self, policy: Policy, backend: Backend) -> None:
        self._policy = policy
        self._backend = backend
        self._units: dict[str, npt.NDArray[np.int64]] = {}

    def cells(self, entry: LogEntry) -> EntryCells:
        """The query sets ``entry`` released.

        The SQL may use every table of the policy, whoever the analyst: the answer
        was given, and a foreign log's analysts need not be declared. With the
        guard's own answer attached, only the cells it published count;
        otherwise every cell of the answer does (LIMIT / OFFSET included: a foreign
        log does not say which rows were sent, so the audit over-reports).

        Raises:
            QueryRejected: the guard would not accept the SQL (the entry is not replayable).
            BackendError: the engine failed.
        """
        tree = parse(entry.sql, self._policy.limits)
        select, table = validate(tree, self._policy.tables)
        info = self._backend.table_info(table.name)
        shape = analyze(select, table, info.types, self._policy.limits)
        notes: list[str] = []
        if entry.answer is None and (shape.limit is not None or shape.offset):
            notes.append(
                "LIMIT/OFFSET: every cell counted as released (the log does not say which were sent)"
            )
        if entry.data_version and entry.data_version != info.data_version:
            notes.append(
                f"answered on data version {entry.data_version[:12]}, replayed on "
                f"{info.data_version[:12]}: the replay may differ from what was released"
            )
        found = self._read(shape)
        if entry.answer is not None:
            published = published_cells(shape, entry.answer, {key for key, _ in found})
            if published is None:
                notes.append(
                    "the logged answer could not be matched to cells: every cell counted as released"
                )
            else:
                found = [
                    (key, cell) for key, cell in found if published.get(key, frozenset()) & cell.aggregates
                ]
        return EntryCells(table.name, info.data_version, tuple(c for _, c in found), tuple(notes))

    def unit_of_row(self, table: str) -> npt.NDArray[np.int64]:
        """``_uid`` of every row id 0 .. max(_rid). Row ids that were not loaded (rows
        without a privacy unit leave gaps) get units of their own: no query reads them."""
        if table not in self._units:
            source = exp.to_table(table, quoted=True)
            if self._backend.capabilities.ordered_aggregates:  # two lists: far fewer objects
                by_rid = [exp.Ordered(this=_col("_rid"))]
                lists = [
                    exp.ArrayAgg(this=exp.Order(this=_col(c), expressions=by_rid)) for c in ("_rid", "_uid")
                ]
                [(rids, uids)] = self._backend.execute(exp.select(*lists).from_(source)).rows
            else:
                pairs = self._backend.execute(exp.select(_col("_rid"), _col("_uid")).from_(source)).rows
                rids, uids = [p[0] for p in pairs], [p[1] for p in pairs]
            rid = np.asarray(rids or [], dtype=np.int64)
            uid = np.asarray(uids or [], dtype=np.int64)
            size = int(rid.max()) + 1 if rid.size else 0
            units = np.arange(size, dtype=np.int64) + (int(uid.max()) + 1 if uid.size else 0)
            units[rid] = uid
            self._units[table] = units
        return self._units[table]

    def describe(self, table: str, rows: RowIds) -> dict[str, Scalar | None] | None:
        """The dimension values every row of ``rows`` shares (None: all NULL); dimensions that
        vary are left out. None when ``rows`` is empty or larger than ``DESCRIBE_LIMIT``."""
        declared = self._policy.table(table)
        if declared is None or not 0 < rows.size <= DESCRIBE_LIMIT:
            return None
        dimensions = declared.names(Role.DIMENSION)
        projections: list[exp.Expr] = [exp.Count(this=exp.Star())]
        for name in dimensions:
            column = _col(name)
            distinct = exp.Count(this=exp.Distinct(expressions=[column.copy()]))
            projections += [distinct, exp.Count(this=column.copy()), exp.Min(this=column.copy())]
        condition = exp.In(this=_col("_rid"), expressions=[exp.Literal.number(int(r)) for r in rows])
        query = exp.select(*projections).from_(exp.to_table(table, quoted=True)).where(condition)
        [(total, *stats)] = self._backend.execute(query).rows
        shared: dict[str, Scalar | None] = {}
        for i, name in enumerate(dimensions):
            distinct, present, value = stats[3 * i : 3 * i + 3]
            if present == 0:
                shared[name] = None
            elif distinct == 1 and present == total:
                shared[name] = value
        return shared

    def _read(self, shape: QueryShape) -> list[tuple[CellKey, CellSet]]:
        """Every cell's query sets with the cell's key, from one backend query."""
        by_filter: dict[tuple[str, str | None], list[int]] = {}
        for i, aggregate in enumerate(shape.aggregates):
            by_filter.setdefault(space_of(aggregate.func, aggregate.column), []).append(i)
        spaces = list(by_filter)
        result = self._backend.execute(_rid_query(shape, [column for _, column in spaces]))
        keys = shape.group_by
        first_list = len(keys) + (1 if shape.grouping_sets else 0)
        found = []
        for row in result.rows:
            level = _level(shape, row[len(keys)] if shape.grouping_sets else 0)
            values = tuple(row[keys.index(k)] for k in level)
            key = (level, tuple(normalized(v) for v in values))
            label = _label(level, values)
            for j, (space, column) in enumerate(spaces):
                rids = row[first_list + j]
                if rids:
                    # COUNT(col) has its own query set in the count space: name it apart
                    suffix = f" [count({column})]" if space == COUNT_SPACE and column else ""
                    rows = np.asarray(rids, dtype=np.int64)
                    aggregates = frozenset(by_filter[(space, column)])
                    found.append((key, CellSet(space, label + suffix, rows, aggregates)))
        return found


def _rid_query(shape: QueryShape, filters: list[str | None]) -> exp.Select:
    """SELECT keys, [grouping id], per filter the sorted _rid list ... GROUP BY the levels."""
    keys = [_col(k) for k in shape.group_by]
    projections: list[exp.Expr] = [k.copy() for k in keys]
    if shape.grouping_sets:
        projections.append(exp.alias_(exp.Grouping(expressions=[k.copy() for k in keys]), _GID, quoted=True))
    for i, column in enumerate(filters):
        rids: exp.Expr = exp.ArrayAgg(
            this=exp.Order(this=_col("_rid"), expressions=[exp.Ordered(this=_col("_rid"))])
        )
        if column is not None:
            present = exp.Not(this=exp.Is(this=_col(column), expression=exp.Null()))
            rids = exp.Filter(this=rids, expression=exp.Where(this=present))
        projections.append(exp.alias_(rids, f"__rids_{i}", quoted=True))
    query = exp.select(*projections).from_(exp.to_table(shape.table, quoted=True))
    condition = _where(shape.predicates)
    if condition is not None:
        query = query.where(condition)
    if shape.grouping_sets:
        sets = dict.fromkeys(frozenset(s) for s in shape.grouping_sets)
        tuples = [exp.Tuple(expressions=[_col(k) for k in shape.group_by if k in s]) for s in sets]
        query = query.group_by(exp.GroupingSets(expressions=tuples))
    elif keys:
        query = query.group_by(*[k.copy() for k in keys])
    return query


def _level(shape: QueryShape, gid: int) -> tuple[str, ...]:
    """The keys not rolled up in a row with grouping id ``gid`` (bit set: rolled up, first
    key most significant), in ``shape.levels``' order of keys."""
    kept = set(shape.kept_keys(gid))
    for level in shape.levels:
        if set(level) == kept:
            return level
    return tuple(k for k in shape.group_by if k in kept)


def _label(level: tuple[str, ...], values: tuple[object, ...]) -> str:
    """``major='EE', sex='Male'`` (public dimension values); ``all rows`` for the total."""
    if not level:
        return "all rows"
    return ", ".join(
        f"{k} IS NULL" if v is None else f"{k}={_literal(v)}" for k, v in zip(level, values, strict=True)
    )


def _literal(value: object) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return str(value)
    text = normalized(value)
    return "'" + str(text).replace("'", "''") + "'"


def _col(name: str) -> exp.Column:
    return exp.column(name, quoted=True)
