"""Random question sequences on random panel tables through the Guard: zero disclosures.

Each example is a random table of 6-9 respondents with 1-3 rows each (a year per row),
three dimensions, one bounded measure, history k drawn from 2 to the number of
respondents (at most 10), and a random sequence of conjunctive SUM / COUNT questions,
grouped or not, from two colluding analysts. After the sequence, an exact rational
oracle over the released query sets (read with plain DuckDB, never with the guard) finds
no nonzero combination of answers whose rows touch fewer than k respondents, in any
space. The same sequences without the history audit do disclose (the attack is real).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from guard import Guard

from .history_helpers import Ask, Attacker, Microdata
from .oracle import small_group_exposed

TABLE = "panel"
DIMENSIONS: dict[str, list[Any]] = {
    "colour": ["blue", "green"],
    "level": [1, 2, 3],
    "year": [2020, 2021, 2022],
}
AGGREGATES = [("SUM(m)",), ("COUNT(*)",), ("SUM(m)", "COUNT(*)")]


def _table(rng: random.Random, folder: Path, audit: bool) -> tuple[Path, list[int], int]:
    units = rng.randint(6, 9)
    rows: list[tuple[Any, ...]] = []
    unit_of_row = []
    for unit in range(units):
        colour = rng.choice(DIMENSIONS["colour"])
        for year in rng.sample(DIMENSIONS["year"], rng.randint(1, 3)):
            rows.append((f"p{unit}", colour, rng.choice(DIMENSIONS["level"]), year, rng.randint(0, 100)))
            unit_of_row.append(unit)
    frame = pd.DataFrame(rows, columns=["id", "colour", "level", "year", "m"])
    frame.to_csv(folder / "panel.csv", index=False)
    k = rng.randint(2, min(10, units))
    document = {
        "name": "panel",
        "protection": {
            "min_query_set_size": 1,
            "allow_full_population": True,
            "suppression": {"linked": "none"},
            "history": {"audit": "exact" if audit else "off", "k": k},
        },
        "tables": {
            TABLE: {
                "source": {"csv": str(folder / "panel.csv")},
                "privacy_unit": "id",
                "columns": {
                    "id": {"role": "identifier"},
                    **{d: {"role": "dimension"} for d in DIMENSIONS},
                    "m": {"role": "measure", "bounds": [0, 100]},
                },
            }
        },
        "analysts": {"alice": {}, "bob": {}},
    }
    policy = folder / "panel.yaml"
    policy.write_text(yaml.safe_dump(document))
    return policy, unit_of_row, k


def _ask(rng: random.Random) -> Ask:
    conjuncts = []
    for column, values in DIMENSIONS.items():
        if rng.random() < 0.5:
            v = rng.choice(values)
            literal = f"'{v}'" if isinstance(v, str) else str(v)
            conjuncts.append(rng.choice([f"{column} = {literal}", f"{column} <> {literal}"]))
    by: tuple[str, ...] = ()
    if rng.random() < 0.5:
        by = tuple(rng.sample(list(DIMENSIONS), rng.choice((1, 2))))
    return Ask(
        " AND ".join(conjuncts), rng.choice(AGGREGATES), by, False, rng.choice(("alice", "bob")), TABLE
    )


def _run(seed: int, folder: Path, audit: bool, questions: int = 25) -> tuple[bool, int]:
    """(a small group is exposed by what was published, number of published values)."""
    rng = random.Random(seed)
    policy, unit_of_row, k = _table(rng, folder, audit)
    data = Microdata(folder / "panel.csv", TABLE)
    published: dict[str, list[frozenset[int]]] = {}
    count = 0
    try:
        with Guard.open(policy, state=folder / "state") as guard:
            spy = Attacker(data)
            for _ in range(questions):
                for cell in spy.ask(guard, _ask(rng)).cells:
                    if cell.published and cell.rows:
                        published.setdefault(cell.space, []).append(cell.rows)
                        count += 1
    finally:
        data.close()
    exposed = any(small_group_exposed(sets, unit_of_row, k) for sets in published.values())
    return exposed, count


@pytest.mark.parametrize("seed", range(10))
def test_no_sequence_exposes_a_small_group(tmp_path: Path, seed: int) -> None:
    exposed, published = _run(seed, tmp_path, audit=True)
    assert not exposed
    assert published > 0


def test_the_same_sequences_disclose_without_the_audit(tmp_path: Path) -> None:
    exposed = []
    for seed in range(10):
        folder = tmp_path / str(seed)
        folder.mkdir()
        exposed.append(_run(seed, folder, audit=False)[0])
    assert sum(exposed) >= 5, exposed
