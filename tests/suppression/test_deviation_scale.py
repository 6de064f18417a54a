"""The deviation LP on magnitude-weighted costs: a real instance HiGHS gave up on.

The instance (``data/deviation_scale.json.gz``) is the attacker view of a sequence that
was refused: 100,000 generated persons, ``occupation x sex`` SUM(income) released, then
``region x ageband`` AVG(income) (two tables sharing only the grand total), threshold
rule only. Its costs are cell magnitudes (up to 2.6e9) next to zeros for withheld cells;
on them HiGHS stopped with "numerical difficulties" and the sensitive cell was declared
unprotectable, so the second table was refused although a deviation exists.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from guard.suppression.deviation import DeviationProblem, cheapest_deviation
from guard.suppression.table import TOTAL, Relation, Table

DATA = Path(__file__).parent / "data" / "deviation_scale.json.gz"


@pytest.fixture(scope="module")
def instance() -> dict[str, Any]:
    with gzip.open(DATA, "rt") as f:
        doc: dict[str, Any] = json.load(f)
    keys = [tuple(TOTAL if x is None else x for x in k) for k in doc["keys"]]
    values = dict(zip(keys, doc["values"], strict=True))
    relations = [Relation(keys[t], tuple(keys[m] for m in members)) for t, members in doc["relations"]]
    doc["table"] = Table.from_cells(
        values, lower=dict(zip(keys, doc["lower"], strict=True)), relations=relations
    )
    return doc


@pytest.mark.parametrize("upward", [True, False])
@pytest.mark.parametrize("distant", [False, True])
def test_a_deviation_is_found_on_magnitude_costs(
    instance: dict[str, Any], upward: bool, distant: bool
) -> None:
    table: Table = instance["table"]
    problem = DeviationProblem.of(table, set(instance["kept"]))
    costs = np.asarray(instance["costs"])
    cell, level = instance["cell"], instance["level"]
    deviation = cheapest_deviation(
        problem, costs, cell, level, upward, hidden=set(instance["hidden"]), distant=distant, rounds=0
    )
    assert deviation is not None
    # an attacker's view consistent with everything published: A d = 0, kept cells fixed,
    # within the bounds, and the sensitive cell moved by its level
    assert np.abs(table.matrix @ deviation).max() <= 1e-6 * level
    assert np.abs(deviation[instance["kept"]]).max(initial=0.0) == 0.0
    moved = deviation[cell] if upward else -deviation[cell]
    assert moved >= level * (1 - 1e-9)
    values = np.asarray(table.values)
    assert (values + deviation >= np.asarray(table.lower) - 1e-6 * level).all()


def test_the_deviation_does_not_depend_on_the_costs_scale(instance: dict[str, Any]) -> None:
    table: Table = instance["table"]
    problem = DeviationProblem.of(table, set(instance["kept"]))
    costs = np.asarray(instance["costs"])
    hidden = set(instance["hidden"])
    cell, level = instance["cell"], instance["level"]
    found = [
        cheapest_deviation(problem, costs * scale, cell, level, False, hidden=hidden, distant=False, rounds=0)
        for scale in (1.0, 1e-9)
    ]
    assert found[0] is not None and found[1] is not None
    np.testing.assert_allclose(found[0], found[1], atol=1e-6 * level)
