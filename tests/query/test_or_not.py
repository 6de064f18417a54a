"""OR and NOT in WHERE, read as the normal form they equal: an oracle check.

For random WHERE clauses built from AND, OR, NOT, IN, <>, BETWEEN and ranges, whatever
the front end accepts must select exactly the rows DuckDB selects with the clause as
written (rows with NULLs included), evaluated here independently of the guard: its
conditions are applied in numpy. Where the history audit is on, every such clause is
accepted; where it is off, only those whose normal form is a plain conjunction (OR of
one column's values, NOT of a comparison), and the rest is rejected, never misread."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from guard.errors import QueryRejected
from guard.policy.load import load_policy
from guard.query.front import read_query
from guard.query.shape import AnyOf, Condition, Predicate, PredOp

ROOT = Path(__file__).resolve().parents[2]
POLICY = load_policy(ROOT / "policies" / "students.yaml")
UNAUDITED = load_policy(Path(__file__).resolve().parent / "unaudited.yaml")
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


def _selected(conditions: tuple[Condition, ...]) -> np.ndarray:
    mask = np.ones(len(FRAME), dtype=bool)
    for condition in conditions:
        if isinstance(condition, AnyOf):
            either = np.zeros(len(FRAME), dtype=bool)
            for p in condition.alternatives:
                either |= _rows(p)
            mask &= either
        else:
            mask &= _rows(condition)
    return mask


def _rows(p: Predicate) -> np.ndarray:
    column = FRAME[p.column]
    known = column.notna().to_numpy()
    if p.op is PredOp.IS_NULL:
        return ~known
    if p.op is PredOp.IS_NOT_NULL:
        return known
    values = column.to_numpy()
    return np.array([bool(k and _holds(p, v)) for k, v in zip(known, values, strict=True)])


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
    kind = rng.integers(0, 5) if depth < 3 else 0
    if kind == 0:
        column = str(rng.choice(list(ATOMS)))
        return str(rng.choice(ATOMS[column]))
    if kind == 1:  # alternatives, on one column or two
        column = str(rng.choice(list(ATOMS)))
        other = column if rng.random() < 0.5 else str(rng.choice(list(ATOMS)))
        return f"({rng.choice(ATOMS[column])} OR {rng.choice(ATOMS[other])})"
    if kind == 2:
        return f"NOT ({_clause(rng, depth + 1)})"
    if kind == 3:
        return f"({_clause(rng, depth + 1)} OR {_clause(rng, depth + 1)})"
    if rng.random() < 0.2:
        return f"class {'NOT ' if rng.random() < 0.5 else ''}BETWEEN 1979 AND 1980"
    return f"({_clause(rng, depth + 1)} AND {_clause(rng, depth + 1)})"


def _read(where: str, policy: object) -> tuple[Condition, ...]:
    sql = f"SELECT COUNT(*) FROM students WHERE {where}"
    return read_query(sql, policy, None, lambda _table: TYPES).shape.predicates  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(300))
def test_accepted_where_clauses_select_the_rows_they_say(seed: int) -> None:
    where = _clause(np.random.default_rng(seed))
    raw = _raw(where)
    try:
        conditions = _read(where, POLICY)
    except QueryRejected as refusal:  # only a formula too large to normalize
        assert "too complex" in str(refusal), (where, refusal)
        return
    assert (_selected(conditions) == raw).all(), where
    try:
        plain = _read(where, UNAUDITED)
    except QueryRejected as refusal:
        assert "allowed only where answers are audited" in str(refusal) or "too complex" in str(refusal)
        assert any(isinstance(c, AnyOf) for c in conditions), where
        return
    assert plain == conditions and not any(isinstance(c, AnyOf) for c in plain), where


def test_the_random_clauses_cover_disjunctions_and_selective_masks() -> None:
    """The oracle test is only as good as its clauses: many must need a disjunction,
    and their row sets must vary (neither all rows nor none)."""
    disjunctive = selective = 0
    for seed in range(300):
        where = _clause(np.random.default_rng(seed))
        try:
            conditions = _read(where, POLICY)
        except QueryRejected:
            continue
        disjunctive += any(isinstance(c, AnyOf) for c in conditions)
        mask = _selected(conditions)
        selective += bool(0 < mask.sum() < len(mask))
    assert disjunctive >= 60 and selective >= 150, (disjunctive, selective)


def test_a_wrong_negation_would_be_caught() -> None:
    """NOT BETWEEN read as a conjunction of the two ranges (a plausible slip) selects
    other rows than DuckDB: the oracle sees the difference."""
    wrong = (Predicate("class", PredOp.LT, (1979,)), Predicate("class", PredOp.GT, (1980,)))
    right = _read("class NOT BETWEEN 1979 AND 1980", POLICY)
    raw = _raw("class NOT BETWEEN 1979 AND 1980")
    assert (_selected(right) == raw).all() and not (_selected(wrong) == raw).all()
