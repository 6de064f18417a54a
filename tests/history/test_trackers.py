"""Trackers (Schlörer; Denning, Denning & Schwartz) and complement queries must fail.

Each attack pads a small target set C with a larger tracker and subtracts. Every query
passes query-set-size control on its own; the audit must refuse the one that completes
the disclosure. Checked on the 9-student table (target: Baker = female EE) and on a
generated 10,000-row table with one planted unique respondent.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest

from guard.history import SpanAuditor

from .conftest import RowsOf
from .oracle import RationalSpan

Rows = npt.NDArray[np.int64]

# Attacks as predicates over (target C, tracker pieces); the SUM identity in each docstring.
STUDENT_ATTACKS: dict[str, list[str]] = {
    # q(C) = q(C1) - q(C1 AND NOT C2), C = C1 AND C2
    "individual": ["sex = 'Female'", "sex = 'Female' AND major <> 'EE'"],
    # q(C) = q(C OR T) + q(C OR NOT T) - q(T) - q(NOT T), 2k <= |T| <= N - 2k
    "general": [
        "class <= 1978",
        "NOT (class <= 1978)",
        "(sex = 'Female' AND major = 'EE') OR class <= 1978",
        "(sex = 'Female' AND major = 'EE') OR NOT (class <= 1978)",
    ],
    # q(C) = q(U) + q(C OR T) - q(T) - q(U AND NOT (C AND T)), T subset of U
    "double": [
        "class <= 1979",
        "(sex = 'Female' AND major = 'EE') OR (sex = 'Male' AND class <= 1978)",
        "sex = 'Male' AND class <= 1978",
        "class <= 1979 AND NOT (sex = 'Female' AND major = 'EE' AND sex = 'Male' AND class <= 1978)",
    ],
    # q(C) = q(T_i OR C) - q(T_i), for a union-tracker piece T_i disjoint from C
    "union": ["major = 'CS'", "major = 'CS' OR (sex = 'Female' AND major = 'EE')"],
    # q(C) = q(ALL) - q(NOT C)
    "complement": ["TRUE", "NOT (sex = 'Female' AND major = 'EE')"],
}


def guarded_run(auditor: SpanAuditor, queries: list[Rows], k: int) -> list[str]:
    decisions = []
    for i, rows in enumerate(queries):
        if auditor.implied(rows):
            decisions.append("implied")
        elif auditor.would_disclose(rows, k=k):
            decisions.append("refused")
        else:
            auditor.release(rows, tag=i)
            decisions.append("released")
    return decisions


def small_determined(auditor: SpanAuditor, k: int) -> list[int]:
    return [d.atom for d in auditor.determined() if d.units < k]


@pytest.mark.parametrize("attack", sorted(STUDENT_ATTACKS))
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reversed"])
def test_student_trackers_fail(rows_of: RowsOf, attack: str, reverse: bool) -> None:
    k = 2
    queries = [rows_of(w) for w in STUDENT_ATTACKS[attack]]
    queries = queries[::-1] if reverse else queries
    for rows in queries:
        # The complement attack is what the upper bound N - k exists for; the audit needs no bound.
        upper = 9 if attack == "complement" else 9 - k
        assert k <= rows.size <= upper or rows.size == 9, "each query passes query-set-size control"

    unguarded = RationalSpan(9)
    for rows in queries:
        unguarded.add(rows.tolist())
    assert unguarded.contains([1]), "the attack really discloses Baker when nothing is refused"

    auditor = SpanAuditor(np.arange(9))
    decisions = guarded_run(auditor, queries, k)
    assert "refused" in decisions
    assert small_determined(auditor, k) == []
    guarded = RationalSpan(9)
    for rows, decision in zip(queries, decisions, strict=True):
        if decision == "released":
            guarded.add(rows.tolist())
    assert not any(guarded.contains([r]) for r in range(9)), "no single income is derivable"


def generated_table(n: int = 10_000, seed: int = 7) -> pd.DataFrame:
    """Random respondents; row 0 is the only one with its (sex, major, class, region)."""
    rng = np.random.default_rng(seed)
    table = pd.DataFrame(
        {
            "sex": rng.integers(0, 2, n),
            "major": rng.integers(0, 5, n),
            "class": rng.integers(0, 4, n),
            "region": rng.integers(0, 20, n),
        }
    )
    target = {"sex": 1, "major": 4, "class": 3, "region": 7}
    for column, value in target.items():
        table.loc[0, column] = value
    clash = (table[list(target)] == pd.Series(target)).all(axis=1)
    clash.iloc[0] = False
    table.loc[clash, "region"] = 8  # nobody else shares the target's combination
    return table


Predicate = Callable[[pd.DataFrame], "pd.Series[bool]"]


def target(t: pd.DataFrame) -> pd.Series[bool]:
    return (t.sex == 1) & (t.major == 4) & (t["class"] == 3) & (t.region == 7)


def c1(t: pd.DataFrame) -> pd.Series[bool]:
    return (t.sex == 1) & (t.major == 4) & (t["class"] == 3)


GENERATED_ATTACKS: dict[str, list[Predicate]] = {
    "individual": [c1, lambda t: c1(t) & (t.region != 7)],
    "general": [
        lambda t: t.region < 10,
        lambda t: ~(t.region < 10),
        lambda t: target(t) | (t.region < 10),
        lambda t: target(t) | ~(t.region < 10),
    ],
    "double": [
        lambda t: t.region < 10,
        lambda t: target(t) | (t.region < 5),
        lambda t: t.region < 5,
        lambda t: (t.region < 10) & ~(target(t) & (t.region < 5)),
    ],
    "union": [lambda t: t.region < 3, lambda t: (t.region < 3) | target(t)],
    "complement": [lambda t: t.region >= 0, lambda t: ~target(t)],
}


@pytest.mark.parametrize("attack", sorted(GENERATED_ATTACKS))
def test_generated_table_trackers_fail(attack: str) -> None:
    k = 5
    table = generated_table()
    assert int(target(table).sum()) == 1
    queries = [np.flatnonzero(p(table).to_numpy()).astype(np.int64) for p in GENERATED_ATTACKS[attack]]
    for rows in queries:
        assert k <= rows.size, "each query passes the lower query-set-size bound"

    unguarded = SpanAuditor(np.arange(len(table)))
    for rows in queries:
        unguarded.release(rows)
    assert 0 in [unguarded.partition.rows(a).tolist()[0] for a in small_determined(unguarded, k)]

    auditor = SpanAuditor(np.arange(len(table)))
    decisions = guarded_run(auditor, queries, k)
    assert "refused" in decisions
    assert small_determined(auditor, k) == []
