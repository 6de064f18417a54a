"""OR and NOT in WHERE, read as the positive forms they equal: an oracle check.

For random WHERE clauses built from OR (alternatives on one column), NOT, IN, <> and
ranges, whatever the front end accepts must select exactly the rows DuckDB selects with
the clause as written (rows with NULLs included), evaluated here independently of the
guard: its canonical predicates are applied in pandas. What it cannot read positively
(OR across columns, NOT of a range or of a conjunction) is rejected, never misread."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from guard.errors import QueryRejected
from guard.policy.load import load_policy
from guard.query.front import read_query
from guard.query.shape import Predicate, PredOp

ROOT = Path(__file__).resolve().parents[2]
POLICY = load_policy(ROOT / "policies" / "students.yaml")
TYPES = {"name": "VARCHAR", "sex": "VARCHAR", "major": "VARCHAR", "class": "BIGINT", "income": "BIGINT"}
FRAME = pd.DataFrame(
    {
        "sex": ["Female", "Male", None, "Male", "Female", "Male", "Female", None],
        "major": ["CS", "EE", "EE", None, "ME", "CS", "EE", "ME"],
        "class": [1978, 1979, 1980, None, 1981, 1980, 1979, 1978],
    }
)
ATOMS = {
    "sex": ["sex = 'Male'", "sex = 'Female'", "sex IN ('Male', 'X')", "sex <> 'Male'", "sex IS NULL"],
    "major": ["major = 'EE'", "major IN ('CS', 'ME')", "major <> 'CS'", "major IS NOT NULL"],
    "class": ["class = 1980", "class < 1980", "class >= 1979", "class IN (1978, 1981)", "class <> 1979"],
}


def _selected(predicates: tuple[Predicate, ...]) -> np.ndarray:
    mask = np.ones(len(FRAME), dtype=bool)
    for p in predicates:
        column = FRAME[p.column]
        known = column.notna().to_numpy()
        values = column.to_numpy()
        if p.op is PredOp.IS_NULL:
            mask &= ~known
            continue
        if p.op is PredOp.IS_NOT_NULL:
            mask &= known
            continue
        mask &= np.array([bool(k and _holds(p, v)) for k, v in zip(known, values, strict=True)])
    return mask


def _holds(p: Predicate, v: object) -> bool:
    first = p.values[0]
    if p.op is PredOp.IN:
        return v in p.values
    if p.op is PredOp.NE:
        return bool(v != first)
    if p.op is PredOp.BETWEEN:
        return bool(first <= v <= p.values[1])  # type: ignore[operator]
    compare = {PredOp.LT: v < first, PredOp.LE: v <= first, PredOp.GT: v > first, PredOp.GE: v >= first}  # type: ignore[operator]
    return bool(compare[p.op])


def _raw(where: str) -> np.ndarray:
    con = duckdb.connect()
    con.register("students", FRAME.assign(row=range(len(FRAME))))
    rows = {r for (r,) in con.execute(f"SELECT row FROM students WHERE {where}").fetchall()}
    return np.array([i in rows for i in range(len(FRAME))])


def _clause(rng: np.random.Generator, depth: int = 0) -> str:
    kind = rng.integers(0, 4) if depth < 2 else 0
    if kind == 0:
        column = str(rng.choice(list(ATOMS)))
        return str(rng.choice(ATOMS[column]))
    if kind == 1:  # alternatives, mostly on one column
        column = str(rng.choice(list(ATOMS)))
        other = column if rng.random() < 0.8 else str(rng.choice(list(ATOMS)))
        return f"({rng.choice(ATOMS[column])} OR {rng.choice(ATOMS[other])})"
    if kind == 2:
        return f"NOT ({_clause(rng, depth + 1)})"
    return f"({_clause(rng, depth + 1)} AND {_clause(rng, depth + 1)})"


@pytest.mark.parametrize("seed", range(300))
def test_accepted_where_clauses_select_the_rows_they_say(seed: int) -> None:
    where = _clause(np.random.default_rng(seed))
    sql = f"SELECT COUNT(*) FROM students WHERE {where}"
    try:
        front = read_query(sql, POLICY, None, lambda _table: TYPES)
    except QueryRejected as refusal:
        assert "OR is allowed only" in str(refusal) or "NOT is allowed only" in str(refusal), (where, refusal)
        return
    assert (_selected(front.shape.predicates) == _raw(where)).all(), where
