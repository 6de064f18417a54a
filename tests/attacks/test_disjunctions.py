"""Trackers built with OR and NOT across columns (issue 19): allowed where the history
audit is on, because the audit judges query sets on rows, whatever the SQL.

The target is the only pilot in region R4. ``A OR B`` with ``A``, ``B`` both large
gives her pay as ``SUM(A) + SUM(B) - SUM(A OR B)``; ``NOT (A AND B)`` gives it as a
complement. Each attack is first run against a pass-through (exact sums from the data)
to show it is real; then against the guard, where an independent exact oracle (rational
elimination over the rows, tests/history/oracle.py) checks that no group of fewer than
k respondents is derivable from what was released, for the designed trackers and for
random sequences of OR / NOT / AND queries."""

from __future__ import annotations

import itertools
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
import yaml

from guard import Guard, GuardError
from tests.history.oracle import RationalSpan

K = 3
TRACKERS = (
    "SELECT SUM(pay) FROM staff WHERE region = 'R4'",
    "SELECT SUM(pay) FROM staff WHERE job = 'pilot'",
    "SELECT SUM(pay) FROM staff WHERE region = 'R4' OR job = 'pilot'",
    "SELECT SUM(pay) FROM staff",
    "SELECT SUM(pay) FROM staff WHERE NOT (region = 'R4' AND job = 'pilot')",
)
ATOMS = (
    "region = 'R1'",
    "region IN ('R2', 'R4')",
    "region <> 'R3'",
    "job = 'pilot'",
    "job <> 'clerk'",
    "sex = 'F'",
    "grade >= 2",
    "grade BETWEEN 1 AND 2",
)


def _data() -> pd.DataFrame:
    rng = np.random.default_rng(19)
    rows = [("target", "R4", "pilot", "F", 3, 9100)]
    for i in range(59):
        region = ("R1", "R2", "R3", "R4")[i % 4]
        job = ("clerk", "driver", "pilot")[(i // 4) % 3]
        if region == "R4" and job == "pilot":
            job = "clerk"  # the target stays the only pilot of R4
        grade, pay = int(rng.integers(1, 4)), int(rng.integers(2000, 8000))
        rows.append((f"p{i}", region, job, "FM"[i % 2], grade, pay))
    return pd.DataFrame(rows, columns=["name", "region", "job", "sex", "grade", "pay"])


@pytest.fixture(scope="module")
def staff(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, Path]:
    folder = tmp_path_factory.mktemp("disjunctions")
    frame = _data()
    frame.to_csv(folder / "staff.csv", index=False)
    policy = {
        "name": "disjunctions",
        "protection": {"min_query_set_size": K, "history": {"audit": "exact", "k": K}},
        "tables": {
            "staff": {
                "source": {"csv": str(folder / "staff.csv")},
                "privacy_unit": "name",
                "columns": {
                    "name": {"role": "identifier"},
                    "region": {"role": "dimension"},
                    "job": {"role": "dimension"},
                    "sex": {"role": "dimension"},
                    "grade": {"role": "dimension"},
                    "pay": {"role": "measure", "bounds": [0, 20000]},
                },
            }
        },
        "analysts": {"mallory": {}},
    }
    path = folder / "policy.yaml"
    path.write_text(yaml.safe_dump(policy))
    return frame, path


def _rows(frame: pd.DataFrame, sql: str) -> frozenset[int]:
    """The rows a query's WHERE selects, by DuckDB on the raw data (not the guard)."""
    where = sql.partition(" WHERE ")[2] or "true"
    con = duckdb.connect()
    con.register("staff", frame.assign(row=range(len(frame))))
    return frozenset(r for (r,) in con.execute(f"SELECT row FROM staff WHERE {where}").fetchall())


def _pass_through(frame: pd.DataFrame, sql: str) -> float:
    con = duckdb.connect()
    con.register("staff", frame)
    return float(con.execute(sql).fetchone()[0])  # type: ignore[index]


def test_the_trackers_work_on_a_pass_through(staff: tuple[pd.DataFrame, Path]) -> None:
    frame, _ = staff
    a, b, either, total, others = (_pass_through(frame, sql) for sql in TRACKERS)
    target = float(frame.loc[frame.name == "target", "pay"].iloc[0])
    assert a + b - either == target
    assert total - others == target
    # every tracker is a large query set: no per-answer size rule stops any one of them
    assert all(K <= len(_rows(frame, sql)) <= len(frame) - K for sql in TRACKERS[:3])


def _released(guard: Guard, frame: pd.DataFrame, queries: list[str]) -> list[frozenset[int]]:
    sets = []
    for sql in queries:
        try:
            result = guard.query(sql, analyst="mallory")
        except GuardError:
            continue
        if result.rows and result.rows[0][0] is not None:
            sets.append(_rows(frame, sql))
    return sets


def _small_groups_derivable(frame: pd.DataFrame, sets: list[frozenset[int]]) -> list[tuple[int, ...]]:
    span = RationalSpan(len(frame))
    for rows in sets:
        span.add(rows)
    groups = [g for size in range(1, K) for g in itertools.combinations(range(len(frame)), size)]
    return [g for g in groups if span.contains(g)]


def test_the_guard_releases_no_tracker_combination(staff: tuple[pd.DataFrame, Path], tmp_path: Path) -> None:
    frame, policy = staff
    # on a pass-through the released sets would make the target (row 0) derivable
    assert (0,) in _small_groups_derivable(frame, [_rows(frame, sql) for sql in TRACKERS])
    with Guard.open(policy, state=tmp_path) as guard:
        sets = _released(guard, frame, list(TRACKERS))
    assert len(sets) >= 3  # the audit withholds what completes the tracker, not everything
    assert _small_groups_derivable(frame, sets) == []


def _random_where(rng: np.random.Generator, depth: int = 0) -> str:
    kind = rng.integers(0, 4) if depth < 2 else 0
    if kind == 0:
        return str(rng.choice(ATOMS))
    if kind == 1:
        return f"NOT ({_random_where(rng, depth + 1)})"
    joint = " OR " if kind == 2 else " AND "
    return f"({_random_where(rng, depth + 1)}{joint}{_random_where(rng, depth + 1)})"


@pytest.mark.parametrize("seed", range(3))
def test_random_disjunctive_sequences_derive_no_small_group(
    staff: tuple[pd.DataFrame, Path], tmp_path: Path, seed: int
) -> None:
    frame, policy = staff
    rng = np.random.default_rng(seed)
    queries = [f"SELECT SUM(pay) FROM staff WHERE {_random_where(rng)}" for _ in range(30)]
    with Guard.open(policy, state=tmp_path) as guard:
        sets = _released(guard, frame, queries)
    assert len(sets) >= 5, "the sequence must release enough to be a test of the audit"
    assert _small_groups_derivable(frame, sets) == []
