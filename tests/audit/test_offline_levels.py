"""The offline audit of ROLLUP / CUBE / GROUPING SETS answers over dimensions with real NULLs.

Without GROUPING() in the query, a row (north, NULL) is the north subtotal or the group
of north rows whose sex is NULL: its values do not say which. The guard logs each sent
row's grouping set, and the replay must count as released exactly the cells that were
sent with a value. The oracle here is pandas on the raw rows plus the answer's flags:
a released row is the one candidate cell whose SUM is the value sent.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest

from guard import Guard
from guard.audit.answers import row_cells
from guard.audit.cellsets import CellSet, EntryCells, GuardCells
from guard.audit.logsource import LogEntry, entries_from_store, read_log
from guard.audit.offline import AuditResult, audit_log
from guard.history.rowsets import RowIds
from guard.query.front import read_query
from guard.result import Flag
from guard.state.records import LogRecord, Outcome
from guard.state.store import StateStore

K = 3
KEYS = ("region", "sex")
#: rows per (region, sex); None is a real NULL. Some groups are under k: the guard withholds them
GROUPS = {
    ("north", "M"): 5,
    ("north", "F"): 4,
    ("north", None): 1,
    ("south", "M"): 4,
    ("south", "F"): 3,
    ("south", None): 4,
    (None, "M"): 3,
    (None, "F"): 1,
    (None, None): 3,
}
#: the grouping sets each query's rows belong to, as the SQL means them (not as the guard reads it)
QUERIES: dict[str, tuple[str, tuple[tuple[str, ...], ...]]] = {
    "rollup": (
        "SELECT region, sex, SUM(income) FROM people GROUP BY ROLLUP (region, sex)",
        (("region", "sex"), ("region",), ()),
    ),
    "cube": (
        "SELECT region, sex, SUM(income) FROM people GROUP BY CUBE (region, sex)",
        (("region", "sex"), ("region",), ("sex",), ()),
    ),
    "sets": (
        "SELECT region, sex, SUM(income) AS s FROM people GROUP BY GROUPING SETS ((region, sex), (sex), ())",
        (("region", "sex"), ("sex",), ()),
    ),
}
SEQUENCES = {name: [name] for name in QUERIES} | {"all three": ["rollup", "sets", "cube"]}

Cell = tuple[tuple[str, ...], tuple[Any, ...]]


def people() -> pd.DataFrame:
    rng = random.Random(22)
    rows = [(region, sex) for (region, sex), n in GROUPS.items() for _ in range(n)]
    return pd.DataFrame(
        {
            "id": [f"p{i:02d}" for i in range(len(rows))],
            "region": [r for r, _ in rows],
            "sex": [s for _, s in rows],
            "income": [rng.randrange(10_000, 90_000) for _ in rows],
        }
    )


@pytest.fixture
def data() -> pd.DataFrame:
    return people()


@pytest.fixture
def policy(tmp_path: Path, data: pd.DataFrame) -> Path:
    csv = tmp_path / "people.csv"
    data.to_csv(csv, index=False)  # None is written as an empty field: a NULL
    path = tmp_path / "people.yaml"
    path.write_text(
        f"""name: people
protection:
  min_query_set_size: {K}
tables:
  people:
    source:
      csv: {csv}
    privacy_unit: id
    columns:
      id: {{role: identifier}}
      region: {{role: dimension}}
      sex: {{role: dimension}}
      income: {{role: measure, bounds: [0, 100000]}}
analysts:
  alice: {{}}
  bob: {{}}
"""
    )
    return path


def cells_of(data: pd.DataFrame, levels: Sequence[tuple[str, ...]]) -> dict[Cell, list[int]]:
    """Every cell of the grouping sets ``levels``: its row indexes in ``data``."""
    cells: dict[Cell, list[int]] = {}
    for level in levels:
        if not level:
            cells[((), ())] = list(data.index)
            continue
        for values, group in data.groupby(list(level), dropna=False):
            named = tuple(None if pd.isna(v) else v for v in values)
            cells[(level, named)] = list(group.index)
    return cells


def released_by_oracle(
    data: pd.DataFrame, query: str, rows: Sequence[Sequence[Any]], flags: Any
) -> set[Cell]:
    """The cells whose SUM was sent: for each row sent with a released value, the one
    cell that fits its keys (a NULL key: rolled up, or a real NULL) and has that SUM."""
    levels = QUERIES[query][1]
    cells = cells_of(data, levels)
    released = set()
    for row, row_flags in zip(rows, flags, strict=True):
        region, sex, value = row
        fitting = [
            (level, values)
            for level, values in cells
            if all(
                (values[level.index(k)] == v if k in level else v is None)
                for k, v in zip(KEYS, (region, sex), strict=True)
            )
        ]
        assert fitting, row
        if row_flags[2] != Flag.RELEASED.value:
            continue
        [cell] = [c for c in fitting if data.loc[cells[c], "income"].sum() == value]
        released.add(cell)
    return released


def label(cell: Cell) -> str:
    level, values = cell
    if not level:
        return "all rows"
    return ", ".join(
        f"{k} IS NULL" if v is None else f"{k}='{v}'" for k, v in zip(level, values, strict=True)
    )


@dataclass
class Asked:
    """A sequence answered by the guard: its log, and the oracle's released cells per entry."""

    guard: Guard
    entries: list[LogEntry]
    released: list[set[Cell]]
    withheld: int


@pytest.fixture
def asked(
    policy: Path, data: pd.DataFrame, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Asked]:
    sequence = SEQUENCES[request.param]
    with Guard.open(policy, state=tmp_path / "state") as guard:
        released, withheld = [], 0
        for i, query in enumerate(sequence):
            result = guard.query(QUERIES[query][0], analyst=("alice", "bob")[i % 2])
            released.append(released_by_oracle(data, query, result.rows, result.flags))
            withheld += sum(f[2] == Flag.SUPPRESSED.value for f in result.flags)
        yield Asked(guard, entries_from_store(guard.store.log()), released, withheld)


class PassThrough:
    """A cell source that releases exactly the oracle's cells of each entry (row ids: the
    frame's index, one privacy unit per row)."""

    def __init__(self, data: pd.DataFrame, released: Sequence[set[Cell]], queries: Sequence[str]) -> None:
        self.data, self.released, self.queries = data, released, queries

    def cells(self, entry: LogEntry) -> EntryCells:
        query = self.queries[entry.seq - 1]
        cells = cells_of(self.data, QUERIES[query][1])
        levels = QUERIES[query][1]
        # released in the replay's order (the groups found along the way depend on it):
        # grouping sets as the query lists them, then key values, NULL first
        order = sorted(
            self.released[entry.seq - 1],
            key=lambda c: (levels.index(c[0]), [(v is not None, v or "") for v in c[1]]),
        )
        found = tuple(
            CellSet("sum(income)", label(c), np.asarray(cells[c], dtype=np.int64), frozenset({0}))
            for c in order
        )
        return EntryCells("people", "v", found)

    def unit_of_row(self, table: str) -> npt.NDArray[np.int64]:
        return np.arange(len(self.data), dtype=np.int64)

    def describe(self, table: str, rows: RowIds) -> Mapping[str, Any] | None:
        picked = self.data.loc[rows.tolist()]
        shared: dict[str, Any] = {}
        for key in KEYS:
            if picked[key].isna().all():
                shared[key] = None
            elif picked[key].nunique(dropna=False) == 1:
                shared[key] = picked[key].iloc[0]
        return shared


def findings(result: AuditResult) -> list[tuple[Any, ...]]:
    """What an auditor reads of each determined group (not the derivation named)."""
    return sorted(
        (d.space, d.rows, d.units, d.disclosure, d.seq, json.dumps(d.description, sort_keys=True))
        for d in result.determined
    )


@pytest.mark.parametrize("asked", list(SEQUENCES), indirect=True)
def test_the_replay_counts_exactly_the_cells_sent(asked: Asked, data: pd.DataFrame) -> None:
    assert asked.withheld > 0  # the guard withheld small groups
    source = GuardCells(asked.guard.policy, asked.guard.backend)
    for entry, released in zip(asked.entries, asked.released, strict=True):
        assert entry.answer is not None and entry.answer.levels is not None
        replayed = source.cells(entry)
        assert replayed.notes == ()
        query = QUERIES[next(q for q in QUERIES if QUERIES[q][0] == entry.sql)]
        sizes = {label(c): len(rows) for c, rows in cells_of(data, query[1]).items()}
        assert sorted((c.label, c.rows.size) for c in replayed.cells) == sorted(
            (label(c), sizes[label(c)]) for c in released
        )
        # the answer is ambiguous without levels: some rows fit two cells of the data
        assert sum(r[0] is None or r[1] is None for r in entry.answer.rows) > len(query[1]) - 1


@pytest.mark.parametrize("asked", list(SEQUENCES), indirect=True)
def test_findings_are_those_of_the_sent_cells_alone(asked: Asked, data: pd.DataFrame) -> None:
    queries = [next(q for q in QUERIES if QUERIES[q][0] == e.sql) for e in asked.entries]
    own = audit_log(asked.entries, GuardCells(asked.guard.policy, asked.guard.backend), K)
    sent = audit_log(asked.entries, PassThrough(data, asked.released, queries), K)
    assert findings(own) == findings(sent)
    assert own.disclosures == ()  # the guard's protection held; counting withheld cells finds some
    assert [e.cells for e in own.entries] == [len(r) for r in asked.released]


@pytest.mark.parametrize("asked", ["all three"], indirect=True)
def test_the_guards_json_export_keeps_the_levels(asked: Asked, tmp_path: Path) -> None:
    policy = asked.guard.policy
    log = tmp_path / "export.jsonl"  # as ``guard log --format json`` writes it
    log.write_text("".join(json.dumps(r, default=str) + "\n" for r in asked.guard.store.log()))
    source = GuardCells(policy, asked.guard.backend)
    entries = read_log(log)
    assert [e.answer for e in entries] == [e.answer for e in asked.entries]
    assert [e.answer.levels for e in entries if e.answer] == [
        e.answer.levels for e in asked.entries if e.answer
    ]
    for entry, released in zip(entries, asked.released, strict=True):
        assert sorted(c.label for c in source.cells(entry).cells) == sorted(map(label, released))


def old_hash(previous: str, ts: str, row: Mapping[str, Any]) -> str:
    """The record hash as the log computed it before it kept levels (session 21)."""
    fields = ("analyst", "sql", "canonical", "data_version", "decision", "error", "reason")
    body = {"ts": ts, **{k: row[k] for k in (*fields, "columns", "rows", "flags", "notes")}}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256((previous + text).encode()).hexdigest()


def test_an_old_log_without_levels_replays_and_verifies_as_before(
    policy: Path, data: pd.DataFrame, tmp_path: Path
) -> None:
    sql, levels = QUERIES["rollup"]
    with Guard.open(policy, state=tmp_path / "live") as guard:
        result = guard.query(sql, analyst="alice")
    # an old guard's store: the same answer logged without levels, in a table without the column
    state = tmp_path / "old"
    store = StateStore(state)
    record = LogRecord(
        "alice", sql, Outcome.ANSWERED, columns=list(result.columns), rows=result.logged_rows(),
        flags=[list(f) for f in result.flags],
    )  # fmt: skip
    store.append(record)
    store.close()
    with duckdb.connect(str(state / "guard.duckdb")) as con:
        con.execute("ALTER TABLE query_log DROP COLUMN levels")
        cursor = con.execute("SELECT * FROM query_log")
        names = [d[0] for d in cursor.description or []]
        [row] = [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
    assert row["record_hash"] == old_hash(row["prev_hash"], row["ts"].isoformat(), row)
    old = StateStore(state, read_only=True)  # not migrated: no levels column
    try:
        assert old.check_chain().broken is None
        [logged] = old.log()
        assert logged["levels"] is None
    finally:
        old.close()
    with Guard.open(policy, state=state) as guard:  # migrated: the column is added, NULL
        [entry] = entries_from_store(guard.store.log())
        assert entry.answer is not None and entry.answer.levels is None
        replayed = GuardCells(guard.policy, guard.backend).cells(entry)
        # as before: the ambiguous rows cannot be matched, every cell counts as released
        assert replayed.notes == (
            "the logged answer could not be matched to cells: every cell counted as released",
        )
        assert sorted(c.label for c in replayed.cells) == sorted(map(label, cells_of(data, levels)))
        guard.query(sql, analyst="bob")  # a new record, with levels, after the old one
        assert guard.store.check_chain().broken is None
        old_entry, new_entry = entries_from_store(guard.store.log())
        assert old_entry.answer == entry.answer and old_entry.answer.levels is None
        assert new_entry.answer is not None and new_entry.answer.levels is not None
        released = released_by_oracle(data, "rollup", new_entry.answer.rows, new_entry.answer.flags)
        cells = GuardCells(guard.policy, guard.backend).cells(new_entry).cells
        assert (
            sorted(c.label for c in cells)
            == sorted(map(label, released))
            != sorted(c.label for c in replayed.cells)
        )


def test_levels_are_covered_by_the_hash_chain(policy: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    with Guard.open(policy, state=state) as guard:
        guard.query(QUERIES["cube"][0], analyst="alice")
        guard.query("SELECT region, SUM(income) FROM people GROUP BY region", analyst="alice")
        first, second = guard.store.log()
        assert first["levels"]["rows"] and second["levels"] is None  # one grouping set: nothing to say
        assert guard.store.check_chain().broken is None
    for change in ("NULL", """'{"sets": [["region", "sex"]], "rows": [0]}'"""):
        copy = tmp_path / f"copy-{len(change)}"
        copy.mkdir()
        for name in ("guard.duckdb", "log.head", "secret"):
            if (state / name).exists():
                (copy / name).write_bytes((state / name).read_bytes())
        with duckdb.connect(str(copy / "guard.duckdb")) as con:
            con.execute(f"UPDATE query_log SET levels = {change} WHERE id = 1")
        store = StateStore(copy, read_only=True)
        try:
            assert store.check_chain().broken == 1
        finally:
            store.close()


def test_a_recorded_level_picks_the_cell_and_one_that_does_not_fit_is_ignored(policy: Path) -> None:
    with Guard.open(policy, state=policy.parent / "state") as guard:
        shape = read_query(QUERIES["rollup"][0], guard.policy, None, guard.column_types).shape
    total, group = (("region",), ("north",)), (("region", "sex"), ("north", None))
    cells = {total, group, ((), ())}
    row = [("north", None, 1)]
    assert row_cells(shape, row, cells) is None  # fits both: ambiguous without its level
    assert row_cells(shape, row, cells, levels=[("region",)]) == [total]
    assert row_cells(shape, row, cells, levels=[("sex", "region")]) == [group]  # a set: any order
    # a level the query does not have, or one per row missing: matched as without levels
    assert row_cells(shape, row, cells, levels=[("sex",)]) is None
    assert row_cells(shape, row, {total, ((), ())}, levels=[("sex",)]) == [total]
    assert row_cells(shape, row, cells, levels=[]) is None
    # a recorded level whose cell the data does not hold (changed since): as without levels
    assert row_cells(shape, row, {total}, levels=[("region", "sex")]) == [total]
