"""A table with real NULLs in two dimensions, ROLLUP / CUBE / GROUPING SETS questions over
it without GROUPING(), and an oracle of what each answer released, from the raw rows
(pandas) and the answer's flags alone: a row sent with a released value is the one cell
that fits its keys (a NULL key: rolled up, or a real NULL) and has that SUM. Shared by
the offline audit's tests and the back-ends' (each engine answers, then replays).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import yaml

from guard import Guard
from guard.audit.cellsets import CellSet, EntryCells, GuardCells
from guard.audit.logsource import LogEntry, entries_from_store
from guard.audit.offline import AuditResult, audit_log
from guard.history.rowsets import RowIds
from guard.result import Flag

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


def write_policy(folder: Path, data: pd.DataFrame, backend: Mapping[str, Any] | None = None) -> Path:
    """A policy over ``data`` (written as CSV: None is an empty field, a NULL) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    csv = folder / "people.csv"
    data.to_csv(csv, index=False)
    document: dict[str, Any] = {
        "name": "people",
        "protection": {"min_query_set_size": K},
        "tables": {
            "people": {
                "source": {"csv": str(csv)},
                "privacy_unit": "id",
                "columns": {
                    "id": {"role": "identifier"},
                    "region": {"role": "dimension"},
                    "sex": {"role": "dimension"},
                    "income": {"role": "measure", "bounds": [0, 100000]},
                },
            }
        },
        "analysts": {"alice": {}, "bob": {}},
    }
    if backend is not None:
        document["backend"] = dict(backend)
    path = folder / "people.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@dataclass
class Asked:
    """A sequence answered by the guard: its log, and the oracle's released cells per entry."""

    guard: Guard
    entries: list[LogEntry]
    released: list[set[Cell]]
    withheld: int


def ask(guard: Guard, data: pd.DataFrame, sequence: Sequence[str]) -> Asked:
    """Ask ``sequence`` (names of QUERIES), alternating analysts; what the oracle says each
    answer released."""
    released, withheld = [], 0
    for i, query in enumerate(sequence):
        result = guard.query(QUERIES[query][0], analyst=("alice", "bob")[i % 2])
        released.append(released_by_oracle(data, query, result.rows, result.flags))
        withheld += sum(f[2] == Flag.SUPPRESSED.value for f in result.flags)
    return Asked(guard, entries_from_store(guard.store.log()), released, withheld)


def query_name(sql: str) -> str:
    return next(q for q in QUERIES if QUERIES[q][0] == sql)


def check_replayed_cells(asked: Asked, data: pd.DataFrame) -> None:
    """The replay of the guard's log counts exactly the oracle's released cells, and the
    answers were ambiguous without their levels."""
    assert asked.withheld > 0  # the guard withheld small groups
    source = GuardCells(asked.guard.policy, asked.guard.backend)
    for entry, released in zip(asked.entries, asked.released, strict=True):
        assert entry.answer is not None and entry.answer.levels is not None
        replayed = source.cells(entry)
        assert replayed.notes == ()
        levels = QUERIES[query_name(entry.sql)][1]
        sizes = {label(c): len(rows) for c, rows in cells_of(data, levels).items()}
        assert sorted((c.label, c.rows.size) for c in replayed.cells) == sorted(
            (label(c), sizes[label(c)]) for c in released
        )
        # some rows fit two cells of the data by their keys alone
        assert sum(r[0] is None or r[1] is None for r in entry.answer.rows) > len(levels) - 1


def check_findings(asked: Asked, data: pd.DataFrame, **options: Any) -> AuditResult:
    """The audit of the guard's log finds what an audit of the oracle's cells alone finds."""
    queries = [query_name(e.sql) for e in asked.entries]
    own = audit_log(asked.entries, GuardCells(asked.guard.policy, asked.guard.backend), K, **options)
    sent = audit_log(asked.entries, PassThrough(data, asked.released, queries), K, **options)
    assert findings(own) == findings(sent)
    assert [e.cells for e in own.entries] == [len(r) for r in asked.released]
    return own
