"""The Guard's history audit decides every cell as an exact rational oracle over rows does.

Each example is a random small table (12-30 rows, three dimensions of 2-3 values, one
measure) under a policy where the history audit is the only thing that withholds
(min_query_set_size 1, no rules, full population allowed, linked: none; history k = 2
or 3), and a random sequence of conjunctive SUM / COUNT / AVG questions, with and
without GROUP BY (sometimes ROLLUP), from two colluding analysts.

The oracle replays the same cells in the same order (answer rows, then columns), one
``RationalSpan`` over ROW ids per space (``sum(m)``; ``count`` for COUNT(*) and
COUNT(m): a separate state over the same rows). A cell is safe iff, once it is added,
the span newly holds no nonzero vector supported on fewer than k rows (one row per
unit here): no small group's total, and no relation such as x1 - x2 between its
members. Query sets come from DuckDB over the CSV, never from the guard. Cells with an
empty query set are not audited and not compared.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from guard import Guard

from .history_helpers import Ask, Attacker, Microdata
from .oracle import RationalSpan, meets

TABLE = "facts"
DIMENSIONS: dict[str, list[Any]] = {
    "colour": ["blue", "green", "red"],
    "level": [1, 2, 3],
    "shape": ["disc", "ring", "star"],
}
AGGREGATES = [
    ("SUM(m)",),
    ("COUNT(*)",),
    ("SUM(m)", "COUNT(*)"),
    ("COUNT(m)", "SUM(m)"),
    ("AVG(m)", "COUNT(*)"),
]


def _table(rng: random.Random, folder: Path) -> tuple[Path, int]:
    """A random table and a policy for it; returns (policy, history k)."""
    domains = {d: values[: rng.choice((2, 3))] for d, values in DIMENSIONS.items()}
    n = rng.randint(12, 30)
    frame = pd.DataFrame({d: [rng.choice(v) for _ in range(n)] for d, v in domains.items()})
    frame.insert(0, "id", [f"r{i}" for i in range(n)])
    # no NULL measures: a group whose measure is all NULL has an empty SUM query set,
    # which the cell protection (not the audit) withholds, with secondary suppression
    frame["m"] = [rng.randint(0, 100) for _ in range(n)]
    csv = folder / "facts.csv"
    frame.to_csv(csv, index=False)
    k = rng.choice((2, 3))
    document = {
        "name": "facts",
        "protection": {
            "min_query_set_size": 1,
            "allow_full_population": True,
            "suppression": {"linked": "none"},
            "history": {"audit": "exact", "k": k},
        },
        "tables": {
            TABLE: {
                "source": {"csv": str(csv)},
                "privacy_unit": "id",
                "columns": {
                    "id": {"role": "identifier"},
                    **{d: {"role": "dimension"} for d in DIMENSIONS},
                    "m": {"role": "measure", "bounds": [0, 100]},
                },
            }
        },
        "analysts": {"alice": {"description": "analyst"}, "bob": {"description": "analyst"}},
    }
    policy = folder / "facts.yaml"
    policy.write_text(yaml.safe_dump(document))
    return policy, k


def _literal(value: Any) -> str:
    return f"'{value}'" if isinstance(value, str) else str(value)


def _predicate(rng: random.Random, column: str, values: list[Any]) -> str:
    v = rng.choice(values)
    low, high = sorted(rng.sample(values, 2))
    subset = sorted(rng.sample(values, rng.randint(1, len(values))), key=str)
    choices = [
        f"{column} = {_literal(v)}",
        f"{column} <> {_literal(v)}",
        f"{column} IN ({', '.join(_literal(s) for s in subset)})",
        f"{column} < {_literal(v)}",
        f"{column} <= {_literal(v)}",
        f"{column} BETWEEN {_literal(low)} AND {_literal(high)}",
        f"{column} IS NOT NULL",
    ]
    return rng.choice(choices)


def _ask(rng: random.Random) -> Ask:
    conjuncts = [
        _predicate(rng, column, values)
        for column, values in DIMENSIONS.items()
        for _ in range(rng.choice((0, 0, 1, 1, 2)))
    ]
    rng.shuffle(conjuncts)
    by: tuple[str, ...] = ()
    if rng.random() < 0.7:
        by = tuple(rng.sample(list(DIMENSIONS), rng.choice((1, 2, 2, 3))))
    rollup = bool(by) and rng.random() < 0.3
    analyst = rng.choice(("alice", "bob"))
    return Ask(" AND ".join(conjuncts), rng.choice(AGGREGATES), by, rollup, analyst, TABLE)


class Oracle:
    """The exact audit decision of one space, over row ids."""

    def __init__(self, n_rows: int, k: int) -> None:
        self.span = RationalSpan(n_rows)
        self.k = k

    def safe(self, rows: frozenset[int]) -> bool:
        if self.span.contains(rows):
            return True  # implied: nothing new
        trial = self.span.copy()
        trial.add(rows)
        return not any(meets(trial, g) and not meets(self.span, g) for g in self._small_groups())

    def _small_groups(self) -> list[frozenset[int]]:
        """Every set of fewer than k rows (k <= 3 here)."""
        rows = range(self.span.n_rows)
        return [frozenset(g) for size in range(1, self.k) for g in combinations(rows, size)]

    def release(self, rows: frozenset[int]) -> None:
        self.span.add(rows)
        # the guard's releases never leave a small group exposed
        assert not any(meets(self.span, g) for g in self._small_groups())


@dataclass
class Tally:
    decisions: int = 0
    withheld: int = 0
    refused: int = 0
    answers: int = 0
    by_space: dict[str, int] = field(default_factory=dict)

    def add(self, other: Tally) -> None:
        self.decisions += other.decisions
        self.withheld += other.withheld
        self.refused += other.refused
        self.answers += other.answers
        for space, n in other.by_space.items():
            self.by_space[space] = self.by_space.get(space, 0) + n


def run_example(seed: int, folder: Path, questions: int) -> Tally:
    """One random table and question sequence; asserts every decision against the oracle."""
    rng = random.Random(seed)
    policy, k = _table(rng, folder)
    tally = Tally()
    data = Microdata(folder / "facts.csv", TABLE)
    try:
        with Guard.open(policy, state=folder / "state") as guard:
            spy = Attacker(data)
            oracles: dict[str, Oracle] = {}
            for step in range(questions):
                outcome = spy.ask(guard, _ask(rng))
                tally.answers += 1
                tally.refused += outcome.refused is not None
                for cell in outcome.cells:
                    if not cell.rows:
                        continue
                    oracle = oracles.setdefault(cell.space, Oracle(data.n_rows, k))
                    expected = oracle.safe(cell.rows)
                    assert cell.published == expected, (
                        f"seed {seed}, question {step}: {outcome.ask.sql!r} ({outcome.ask.analyst}), "
                        f"cell {cell.group} in {cell.space} over rows {sorted(cell.rows)}: guard "
                        f"{'published' if cell.published else 'withheld'}, oracle "
                        f"{'safe' if expected else 'unsafe'} (k={k})"
                    )
                    if expected:
                        oracle.release(cell.rows)
                    else:  # withheld by the audit, and said so
                        said = [outcome.refused] if outcome.refused else outcome.notes
                        assert any("history audit" in n for n in said), said
                    tally.decisions += 1
                    tally.withheld += not expected
                    tally.by_space[cell.space] = tally.by_space.get(cell.space, 0) + 1
    finally:
        data.close()
    return tally


def _run(seeds: range, questions: int, tmp_path: Path, report: Callable[[str], None]) -> Tally:
    started = time.perf_counter()
    total = Tally()
    for seed in seeds:
        folder = tmp_path / f"seed{seed}"
        folder.mkdir()
        total.add(run_example(seed, folder, questions))
    report(
        f"{total.decisions} decisions ({total.by_space}), {total.withheld} withheld, "
        f"{total.refused} of {total.answers} answers refused, {time.perf_counter() - started:.1f} s"
    )
    return total


def test_guard_matches_the_oracle(tmp_path: Path) -> None:
    total = _run(range(12), 30, tmp_path, print)
    assert total.decisions >= 1_500
    assert total.withheld >= total.decisions // 20, "the sequences reach the audit's limits"
    assert total.by_space.get("count", 0) >= 500 and total.by_space.get("sum(m)", 0) >= 500


@pytest.mark.slow
def test_guard_matches_the_oracle_long_sequences(tmp_path: Path) -> None:
    total = _run(range(100, 124), 60, tmp_path, print)
    assert total.decisions >= 5_000
