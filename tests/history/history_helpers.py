"""Helpers for the online history audit tests, written from the attacker's side.

An attacker asks questions (:class:`Ask`), keeps every value the guard published and
works out each value's query set on their own, with plain DuckDB over the CSV (never
with the guard's code). :func:`determined_groups` then asks the exact rational oracle
(``oracle.RationalSpan``) which small groups of rows those answers pin down.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import yaml

from guard import Guard, QueryRefused

from .oracle import RationalSpan

ROOT = Path(__file__).resolve().parents[2]
STUDENTS_CSV = ROOT / "examples" / "students" / "students.csv"

Change = Callable[[dict[str, Any]], None]
Rows = frozenset[int]


# -- policies ------------------------------------------------------------------------------


def students_policy(
    tmp_path: Path, *changes: Change, csv: Path = STUDENTS_CSV, name: str = "students"
) -> Path:
    """A copy of policies/students.yaml reading ``csv``, with ``changes`` applied in order."""
    document = yaml.safe_load((ROOT / "policies" / "students.yaml").read_text())
    document["tables"]["students"]["source"]["csv"] = str(csv)
    for change in changes:
        change(document)
    target = tmp_path / f"{name}.yaml"
    target.write_text(yaml.safe_dump(document))
    return target


def unlinked(document: dict[str, Any]) -> None:
    """Each answer's cell protection on its own: only the history audit relates answers."""
    document["protection"].setdefault("suppression", {})["linked"] = "none"


def audit_off(document: dict[str, Any]) -> None:
    document["protection"].setdefault("history", {})["audit"] = "off"


def history(**settings: Any) -> Change:
    def change(document: dict[str, Any]) -> None:
        document["protection"].setdefault("history", {}).update(settings)

    return change


def isolated_pairs(count: int) -> Change:
    """Analysts ``alice0, bob0, alice1, ...``, each pair its own history audit group: one
    guard can then run ``count`` independent attack sequences (with ``linked: none``)."""

    def change(document: dict[str, Any]) -> None:
        for i in range(count):
            for name in ("alice", "bob"):
                document["analysts"][f"{name}{i}"] = {"description": "attacker"}
        groups = {f"pair{i}": [f"alice{i}", f"bob{i}"] for i in range(count)}
        document["protection"].setdefault("history", {})["groups"] = groups

    return change


def protection(**settings: Any) -> Change:
    def change(document: dict[str, Any]) -> None:
        document["protection"].update(settings)

    return change


# -- asking --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ask:
    """One question: aggregates over the rows ``where`` selects, optionally grouped."""

    where: str = ""
    aggregates: tuple[str, ...] = ("SUM(income)",)
    by: tuple[str, ...] = ()
    rollup: bool = False
    analyst: str = "alice"
    table: str = "students"

    @property
    def sql(self) -> str:
        keys = ", ".join(self.by)
        select = ", ".join([*self.by, *self.aggregates])
        sql = f"SELECT {select} FROM {self.table}"
        if self.where:
            sql += f" WHERE {self.where}"
        if self.by:
            sql += f" GROUP BY ROLLUP ({keys})" if self.rollup else f" GROUP BY {keys}"
        return sql

    def in_pair(self, pair: int) -> Ask:
        """The same question from this analyst's namesake in ``isolated_pairs``."""
        return self.by_analyst(f"{self.analyst}{pair}")

    def by_analyst(self, analyst: str) -> Ask:
        return Ask(self.where, self.aggregates, self.by, self.rollup, analyst, self.table)


@dataclass(frozen=True)
class Cell:
    """One value of an answer: the rows it is computed over, in its audit space."""

    space: str
    rows: Rows
    value: Any
    #: False: withheld (NULL and flagged ``suppressed``)
    published: bool
    group: tuple[Any, ...] = ()


@dataclass
class Outcome:
    ask: Ask
    cells: list[Cell] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the refusal's message when the whole answer was refused
    refused: str | None = None

    def values(self) -> list[Any]:
        """Published values in answer order (withheld ones as None); [] when refused."""
        return [c.value if c.published else None for c in self.cells]

    def decision(self) -> tuple[Any, ...]:
        """What was answered, independent of the values: for simulatability checks."""
        if self.refused is not None:
            return ("refused", self.refused)
        return ("answered", [(c.space, sorted(c.rows), c.published) for c in self.cells], self.notes)


def _space(aggregate: str) -> tuple[str, str | None]:
    """(audit space, column whose non-NULL rows form the query set) of ``SUM(x)`` etc."""
    func, _, rest = aggregate.partition("(")
    column = rest.rstrip(")").strip()
    func = func.strip().upper()
    if func == "COUNT":
        return "count", None if column == "*" else column
    return f"sum({column.lower()})", column


class Microdata:
    """The rows of one CSV in plain DuckDB, numbered in file order (``_rid``)."""

    def __init__(self, csv: Path, table: str = "students") -> None:
        self.table = table
        self._con = duckdb.connect()
        self._con.execute(
            f"CREATE TABLE {table} AS SELECT (row_number() OVER () - 1)::BIGINT AS _rid, * "
            f"FROM read_csv('{csv}', header = true)"
        )
        (self.n_rows,) = self._con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()  # type: ignore[misc]

    def close(self) -> None:
        self._con.close()

    def rows(self, where: str, column: str | None = None, keys: dict[str, Any] | None = None) -> Rows:
        """Row ids ``where`` selects (with ``column`` not NULL, and ``keys`` equal)."""
        conditions = [f"({where})"] if where else []
        if column is not None:
            conditions.append(f'"{column}" IS NOT NULL')
        parameters = []
        for name, value in (keys or {}).items():
            conditions.append(f'"{name}" = ?')
            parameters.append(value)
        sql = f"SELECT _rid FROM {self.table}"
        if conditions:
            sql += " WHERE " + " AND ".join(conditions)
        return frozenset(int(r) for (r,) in self._con.execute(sql, parameters).fetchall())

    def groups(self, ask: Ask) -> list[tuple[Any, ...]]:
        """The group keys of every cell ``ask`` has in the data (rolled-up keys None)."""
        if not ask.by:
            return [()]
        keys = ", ".join(f'"{c}"' for c in ask.by)
        grouping = f"ROLLUP ({keys})" if ask.rollup else keys
        where = f" WHERE {ask.where}" if ask.where else ""
        sql = f"SELECT {keys} FROM {self.table}{where} GROUP BY {grouping}"
        return [tuple(row) for row in self._con.execute(sql).fetchall()]


class Attacker:
    """Asks the guard and keeps what was published, with query sets read from the microdata."""

    def __init__(self, data: Microdata) -> None:
        self.data = data
        self.n_rows = data.n_rows
        self.outcomes: list[Outcome] = []

    def ask(self, guard: Guard, ask: Ask) -> Outcome:
        outcome = Outcome(ask)
        self.outcomes.append(outcome)
        try:
            result = guard.query(ask.sql, ask.analyst)
        except QueryRefused as refusal:
            # every value withheld: the cells are the groups the data has (order is moot,
            # as none of them was released)
            outcome.refused = refusal.message
            for group in self.data.groups(ask):
                outcome.cells.extend(self._cells(ask, group, [None] * len(ask.aggregates), False))
            return outcome
        outcome.notes = list(result.notes)
        width = len(ask.by)
        for row, flags in zip(result.rows, result.flags, strict=True):
            published = [
                v is not None and f != "suppressed" for v, f in zip(row[width:], flags[width:], strict=True)
            ]
            outcome.cells.extend(self._cells(ask, tuple(row[:width]), row[width:], published))
        return outcome

    def _cells(self, ask: Ask, group: tuple[Any, ...], values: list[Any], published: Any) -> list[Cell]:
        # rolled-up keys are NULL (the test tables have no NULL dimension values)
        keys = {c: v for c, v in zip(ask.by, group, strict=True) if v is not None}
        flags = published if isinstance(published, list) else [published] * len(values)
        cells = []
        for aggregate, value, shown in zip(ask.aggregates, values, flags, strict=True):
            space, column = _space(aggregate)
            cells.append(Cell(space, self.data.rows(ask.where, column, keys), value, shown, group))
        return cells

    def ask_all(self, guard: Guard, asks: Iterable[Ask]) -> list[Outcome]:
        return [self.ask(guard, a) for a in asks]

    def released(self, space: str = "sum(income)", analysts: Iterable[str] | None = None) -> list[Rows]:
        """Query sets of every published value in ``space`` (of ``analysts``: default all)."""
        who = None if analysts is None else set(analysts)
        return [
            c.rows
            for o in self.outcomes
            if who is None or o.ask.analyst in who
            for c in o.cells
            if c.published and c.space == space and c.rows
        ]


# -- the oracle ----------------------------------------------------------------------------


def atoms_of(sets: Sequence[Rows], n_rows: int) -> list[Rows]:
    """Rows grouped by their membership in every set."""
    groups: dict[tuple[bool, ...], set[int]] = {}
    for r in range(n_rows):
        groups.setdefault(tuple(r in s for s in sets), set()).add(r)
    return [frozenset(g) for g in groups.values()]


def determined_groups(sets: Sequence[Rows], n_rows: int, k: int, *, unions: bool = False) -> list[Rows]:
    """Groups of fewer than ``k`` rows whose total the SUMs over ``sets`` determine.

    Checks every atom of ``sets`` (and with ``unions`` every union of atoms) of fewer than
    ``k`` rows: its unit vector in the exact rational span. The span is computed over atoms
    rather than rows: every released vector is constant on atoms, so a union of atoms lies
    in the row span iff its atom indicator lies in the atom span (and nothing else can).
    """
    atoms = atoms_of(sets, n_rows)
    index = {r: i for i, atom in enumerate(atoms) for r in atom}
    span = RationalSpan(len(atoms))
    for s in sets:
        span.add(sorted({index[r] for r in s}))
    small = [i for i, atom in enumerate(atoms) if len(atom) < k]
    found = []
    for size in range(1, (k if unions else 2)):
        for combo in itertools.combinations(small, size):
            rows = frozenset().union(*(atoms[i] for i in combo))
            if len(rows) < k and span.contains(list(combo)):
                found.append(rows)
    return found
