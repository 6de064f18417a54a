"""The offline audit of ROLLUP / CUBE / GROUPING SETS answers over dimensions with real NULLs.

Without GROUPING() in the query, a row (north, NULL) is the north subtotal or the group
of north rows whose sex is NULL: its values do not say which. The guard logs each sent
row's grouping set, and the replay must count as released exactly the cells that were
sent with a value (the oracle: ``nulldims.py``, pandas on the raw rows and the flags).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from guard import Guard
from guard.audit.answers import row_cells
from guard.audit.cellsets import GuardCells
from guard.audit.logsource import entries_from_store, read_log
from guard.query.front import read_query
from guard.state.records import LogRecord, Outcome
from guard.state.store import StateStore
from tests.audit.nulldims import (
    QUERIES,
    SEQUENCES,
    Asked,
    ask,
    cells_of,
    check_findings,
    check_replayed_cells,
    label,
    people,
    released_by_oracle,
    write_policy,
)


@pytest.fixture
def data() -> pd.DataFrame:
    return people()


@pytest.fixture
def policy(tmp_path: Path, data: pd.DataFrame) -> Path:
    return write_policy(tmp_path / "policy", data)


@pytest.fixture
def asked(
    policy: Path, data: pd.DataFrame, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Asked]:
    with Guard.open(policy, state=tmp_path / "state") as guard:
        yield ask(guard, data, SEQUENCES[request.param])


@pytest.mark.parametrize("asked", list(SEQUENCES), indirect=True)
def test_the_replay_counts_exactly_the_cells_sent(asked: Asked, data: pd.DataFrame) -> None:
    check_replayed_cells(asked, data)


@pytest.mark.parametrize("asked", list(SEQUENCES), indirect=True)
def test_findings_are_those_of_the_sent_cells_alone(asked: Asked, data: pd.DataFrame) -> None:
    own = check_findings(asked, data)
    assert own.disclosures == ()  # the guard's protection held; counting withheld cells finds some


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
