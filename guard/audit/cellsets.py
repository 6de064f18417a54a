"""The query sets of a logged query's cells, read from the guard's backend.

A logged SQL text goes through the guard's own pipeline (parse, validate, analyze), so
a query the guard would reject is not replayable, and re-phrasings (``x IN ('a')``,
swapped conjuncts) select the same rows. Then ONE backend query per entry returns, per
cell of every grouping level, the ``_rid`` lists of its query sets (sorted by the engine
when its ``ARRAY_AGG`` keeps an ORDER BY, else here), spelled as the backend's declared
capabilities require:

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

from guard.audit.answers import published_cells
from guard.audit.logsource import LogEntry
from guard.backends.base import Backend, Capabilities
from guard.history.keys import COUNT_SPACE, CellKey, normalized, space_of
from guard.history.rowsets import RowIds
from guard.plan.sql import distinct_sets, grouping_id, grouping_sets
from guard.plan.sql import where as _where
from guard.policy.model import Policy, Role
from guard.query.front import read_query
from guard.query.shape import QueryShape, Scalar
from guard.result import is_nan

__all__ = ["DESCRIBE_LIMIT", "CellSet", "EntryCells", "GuardCells"]

#: atoms with more rows are not described by their dimension values (one IN list each)
DESCRIBE_LIMIT = 1_000


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
        front = read_query(entry.sql, self._policy, None, lambda name: self._backend.table_info(name).types)
        table, shape = front.table, front.shape
        info = self._backend.table_info(table.name)
        notes: list[str] = []
        listing = front.listing
        limited = shape.limit is not None or shape.offset > 0
        if listing is not None:  # a list of values is judged whole, then cut
            limited = listing.limit is not None or listing.offset > 0
        if entry.answer is None and limited:
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
            keys = {key for key, _ in found}
            published = published_cells(shape, entry.answer, keys, listed=listing is not None)
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
        """Every cell's query sets with the cell's key, from one backend query, in an order
        every engine gives alike (levels as in ``shape.levels``, then key values): the
        order of release decides which derivation the audit names, and group numbers."""
        by_filter: dict[tuple[str, str | None], list[int]] = {}
        for i, aggregate in enumerate(shape.aggregates):
            by_filter.setdefault(space_of(aggregate.func, aggregate.column), []).append(i)
        spaces = list(by_filter)
        capabilities = self._backend.capabilities
        result = self._backend.execute(_rid_query(shape, [column for _, column in spaces], capabilities))
        keys = shape.group_by
        sets = distinct_sets(shape)
        first_list = len(keys) + (1 if sets else 0)
        rank = {level: i for i, level in enumerate(shape.levels)}
        cells = []
        for row in result.rows:
            level = _level(shape, row[len(keys)] if sets else 0)
            values = tuple(row[keys.index(k)] for k in level)
            key = (level, tuple(normalized(v) for v in values))
            # NULL keys first and NaN last (as the engine sorts); the other values of a key
            # share one type, so they compare (NaN's name is text: it must not meet them)
            places = tuple(
                (v is not None, is_nan(raw), None if is_nan(raw) else v)
                for v, raw in zip(key[1], values, strict=True)
            )
            order = (rank.get(level, len(rank)), level, places)
            cells.append((order, key, values, row))
        found = []
        for _, key, values, row in sorted(cells, key=lambda cell: cell[0]):
            label = _label(key[0], values)
            for j, (space, column) in enumerate(spaces):
                rids = row[first_list + j]
                if rids:
                    # COUNT(col) has its own query set in the count space: name it apart
                    suffix = f" [count({column})]" if space == COUNT_SPACE and column else ""
                    rows = np.asarray(rids, dtype=np.int64)
                    if not capabilities.ordered_aggregates:
                        rows = np.sort(rows)
                    aggregates = frozenset(by_filter[(space, column)])
                    found.append((key, CellSet(space, label + suffix, rows, aggregates)))
        return found


def _rid_query(shape: QueryShape, filters: list[str | None], capabilities: Capabilities) -> exp.Select:
    """SELECT keys, [grouping id], per filter the _rid list ... GROUP BY the levels.

    The lists are sorted only when the engine keeps ``ARRAY_AGG(... ORDER BY ...)``
    (``capabilities.ordered_aggregates``); the grouping id is spelled as the engine's
    GROUPING() allows (``capabilities.single_key_grouping``)."""
    keys = [_col(k) for k in shape.group_by]
    sets = distinct_sets(shape)
    projections: list[exp.Expr] = [k.copy() for k in keys]
    if sets:
        projections.append(grouping_id(shape, capabilities))
    for i, column in enumerate(filters):
        rids: exp.Expr = exp.ArrayAgg(
            this=exp.Order(this=_col("_rid"), expressions=[exp.Ordered(this=_col("_rid"))])
            if capabilities.ordered_aggregates
            else _col("_rid")
        )
        if column is not None:
            present = exp.Not(this=exp.Is(this=_col(column), expression=exp.Null()))
            rids = exp.Filter(this=rids, expression=exp.Where(this=present))
        projections.append(exp.alias_(rids, f"__rids_{i}", quoted=True))
    query = exp.select(*projections).from_(exp.to_table(shape.table, quoted=True))
    condition = _where(shape.predicates)
    if condition is not None:
        query = query.where(condition)
    if sets:
        query = query.group_by(grouping_sets(sets))
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
