"""A NaN in a float dimension is a group of its own, apart from NULL, on every path.

DuckDB's GROUP BY keeps a DOUBLE NaN and NULL apart (and its predicates too: NaN is not
NULL and sorts above every number, so ``score > 2`` selects it). The live history audit,
the query log and the offline replay of that log must name the two cells apart and
alike, or the replay counts the NaN cell as the NULL one (missing what the NaN cell
disclosed) and the live audit cannot name the NaN cell at all.

The table: a NaN group of four respondents, three in region a and one (id 10) in b,
beside a 1.5 group and a NULL group of six. ``GROUP BY score`` and then the same with
``WHERE region = 'a'`` state respondent 10's income by their difference.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from guard import Guard
from guard.audit.cellsets import GuardCells
from guard.audit.logsource import entries_from_store
from guard.audit.offline import AuditResult, audit_log
from guard.audit.report import to_json
from guard.history.finest import FinestCells
from guard.query.front import read_query

BY_SCORE = "SELECT score, SUM(income) FROM t GROUP BY score"
BY_SCORE_IN_A = "SELECT score, SUM(income) FROM t WHERE region = 'a' GROUP BY score"

#: id, score ('' is NULL), region, income
ROWS = [
    *[(i, "1.5", "a" if i <= 3 else "b", 10 * i) for i in range(1, 7)],
    *[(i, "nan", "a", 10 * i) for i in range(7, 10)],
    (10, "nan", "b", 100),
    *[(i, "", "a" if i <= 13 else "b", 10 * i) for i in range(11, 17)],
]


#: groups of three at the infinities and at zero (-0.0 and 0.0 are one value to the engine)
SIGNED = [
    (17 + i, s, "ab"[i % 2], i) for i, s in enumerate(["inf"] * 3 + ["-inf"] * 3 + ["-0.0", "0.0", "0"])
]


def _policy(tmp_path: Path, history: str, rows: list[tuple[int, str, str, int]] = ROWS) -> Path:
    data = tmp_path / "t.csv"
    data.write_text("id,score,region,income\n" + "".join(f"{i},{s},{r},{m}\n" for i, s, r, m in rows))
    document: dict[str, Any] = {
        "name": "t",
        "protection": {
            "min_query_set_size": 3,
            # each answer protected alone: only the history audit relates answers
            "suppression": {"linked": "none"},
            "history": {"audit": history},
        },
        "tables": {
            "t": {
                "source": {"csv": str(data)},
                "privacy_unit": "id",
                "columns": {
                    "id": {"role": "identifier"},
                    "score": {"role": "dimension"},
                    "region": {"role": "dimension"},
                    "income": {"role": "measure", "bounds": [0, 200]},
                },
            }
        },
        "analysts": {"alice": {"description": "a"}, "bob": {"description": "b"}},
    }
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.fixture
def audited(tmp_path: Path) -> Iterator[Guard]:
    with Guard.open(_policy(tmp_path, "exact"), state=tmp_path / "state") as guard:
        yield guard


@pytest.fixture
def unaudited(tmp_path: Path) -> Iterator[Guard]:
    """A guard without history control: it answers the pair, the replay must find it."""
    with Guard.open(_policy(tmp_path, "off"), state=tmp_path / "state") as guard:
        yield guard


def _replay(guard: Guard) -> AuditResult:
    entries = entries_from_store(guard.store.log())
    return audit_log(
        entries, GuardCells(guard.policy, guard.backend), guard.policy.protection.min_query_set_size
    )


def _by_key(rows: list[list[Any]]) -> dict[str, Any]:
    """Answer rows by their score, spelled so that NaN and NULL are keys apart (and -0.0,
    which the engine may return for the zero group, as 0.0)."""
    return {"NULL" if r[0] is None else "NaN" if math.isnan(r[0]) else str(r[0] + 0.0): r[1] for r in rows}


def test_the_engine_groups_nan_apart_from_null(unaudited: Guard) -> None:
    # the premise: four groups, NaN and NULL among them, each answered
    result = unaudited.query(BY_SCORE, analyst="alice")
    assert _by_key(result.rows) == {"1.5": 210, "NaN": 340, "NULL": 810}


def test_the_finest_cells_keep_nan_apart_from_null_with_the_engines_predicates(audited: Guard) -> None:
    table = audited.policy.table("t")
    assert table is not None
    finest = FinestCells(audited.backend, table, audited.backend.table_info("t"))
    spaces = [("count", None, frozenset({0}))]

    def rows(sql: str) -> dict[Any, int]:
        shape = read_query(sql, audited.policy, audited.policy.analyst("alice"), audited.column_types).shape
        (cells,) = finest.query_sets(shape, spaces)
        return {key[1]: finest.rows(ids) for key, ids in cells.cells.items()}

    grouped = rows("SELECT score, COUNT(*) FROM t GROUP BY score")
    assert grouped == {(1.5,): 6, ("NaN",): 4, (None,): 6}
    # NaN is not NULL, and above every number (DuckDB's order, as the backend answers)
    assert rows("SELECT COUNT(*) FROM t WHERE score IS NULL") == {(): 6}
    assert rows("SELECT COUNT(*) FROM t WHERE score IS NOT NULL") == {(): 10}
    assert rows("SELECT COUNT(*) FROM t WHERE score > 2") == {(): 4}
    finest.close()


def test_the_log_names_nan_and_null_apart(unaudited: Guard) -> None:
    unaudited.query(BY_SCORE, analyst="alice")
    [record] = unaudited.store.log()
    keys = [row[0] for row in record["rows"]]
    assert None in keys and "NaN" in keys and len(keys) == 3


def test_the_replay_finds_what_the_nan_cells_disclose(unaudited: Guard) -> None:
    unaudited.query(BY_SCORE, analyst="alice")
    second = unaudited.query(BY_SCORE_IN_A, analyst="bob")
    assert _by_key(second.rows)["NaN"] == 240  # answered: the guard has no history control
    result = _replay(unaudited)
    assert [e.cells for e in result.entries] == [3, 3]
    # named as the NULL cell, the NaN rows were not counted and respondent 10 went unseen
    [lonely] = result.disclosures
    assert (lonely.units, lonely.entries, lonely.analysts) == (1, (1, 2), ("alice", "bob"))
    assert [c.cell for c in lonely.cells] == ["score=nan", "score=nan"]
    assert lonely.description is not None and lonely.description["region"] == "b"
    assert math.isnan(lonely.description["score"])  # type: ignore[arg-type]
    # the auditor's document names it as the log does, and stays strict JSON
    document = to_json(result, policy="p", log="l", generated=dt.datetime(2026, 11, 28, tzinfo=dt.UTC))
    text = json.dumps(document, allow_nan=False)
    [described] = [g for g in json.loads(text)["determined"] if g["disclosure"]]
    assert described["description"] == {"region": "b", "score": "NaN"}


def test_the_live_audit_names_the_nan_cell_and_withholds_its_difference(audited: Guard) -> None:
    first = audited.query(BY_SCORE, analyst="alice")
    assert all(flag == "released" for row in first.flags for flag in row)
    assert _by_key(first.rows) == {"1.5": 210, "NaN": 340, "NULL": 810}
    second = audited.query(BY_SCORE_IN_A, analyst="bob")
    published = _by_key(second.rows)
    assert published["NaN"] is None and published["1.5"] == 60 and published["NULL"] == 360
    # the replay of what the guard logged names the same cells and finds no disclosure
    result = _replay(audited)
    assert [e.cells for e in result.entries] == [3, 2]
    assert result.disclosures == ()


def test_infinities_and_signed_zero_are_named_alike_live_and_in_the_replay(tmp_path: Path) -> None:
    with Guard.open(_policy(tmp_path, "exact", ROWS + SIGNED), state=tmp_path / "state") as guard:
        result = guard.query(BY_SCORE, analyst="alice")
        assert _by_key(result.rows) == {"-inf": 12, "0.0": 21, "1.5": 210, "inf": 3, "NaN": 340, "NULL": 810}
        assert all(flag == "released" for row in result.flags for flag in row)
        assert guard.query("SELECT SUM(income) FROM t WHERE score > 2", analyst="bob").rows == [[343]]
        replayed = _replay(guard)
    assert [e.cells for e in replayed.entries] == [6, 1] and replayed.disclosures == ()
