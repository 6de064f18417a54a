"""Seed 001's Ms. Rich, answered in noise mode: the Enfield mean no longer tells whether
she attended (bounds [1000, 100000], ε = 1), where the exact mean did (3300 → 12090.91).

The released values are drawn through the guard's own release path (the prepared query
of ``NoiseStage.measure``, then ``draw`` and ``answer`` as ``release`` calls them)
repeatedly, for the two neighbouring databases: hospital.csv and hospital-rich.csv.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from guard import Guard
from guard.noise.release import Prepared
from guard.noise.sampling import InsecureSeededSource
from guard.query.analyze import analyze
from guard.query.parse import parse
from guard.query.validate import validate

from .conftest import HOSPITAL, POLICIES, write_policy

ENFIELD = "SELECT AVG(income) FROM hospital WHERE town = 'Enfield'"
EPSILON = 1.0


def _prepared(guard: Guard, sql: str) -> Prepared:
    info = guard.backend.table_info("hospital")
    select, table = validate(parse(sql, guard.policy.limits), guard.policy.tables)
    shape = analyze(select, table, info.types, guard.policy.limits)
    assert guard.noise is not None
    return guard.noise.measure(shape, table, info, guard.backend.execute)


def _released(guard: Guard, sql: str, draws: int, seed: int) -> np.ndarray:
    prepared = _prepared(guard, sql)
    rng = InsecureSeededSource(seed)
    return np.array([prepared.answer(prepared.draw({}, rng)).rows[0][0] for _ in range(draws)], dtype=float)


def test_the_exact_mean_reveals_ms_rich(tmp_path: Path) -> None:
    """The attack of seed 001, without noise: the two neighbours are told apart exactly."""
    means = []
    for name in ("hospital.yaml", "hospital-rich.yaml"):
        with Guard.open(POLICIES / name, state=tmp_path / name) as guard:
            means.append(guard.query(ENFIELD, "alice").rows[0][0])
    assert means[0] == pytest.approx(3300) and means[1] == pytest.approx(12090.909, abs=0.01)


@pytest.mark.slow
def test_noisy_mean_does_not_reveal_ms_rich(tmp_path: Path, open_guard: Callable[..., Guard]) -> None:
    without = open_guard(write_policy(tmp_path / "a"), state="a")
    with_rich = open_guard(write_policy(tmp_path / "b", csv=HOSPITAL / "hospital-rich.csv"), state="b")
    draws = 4000
    a = _released(without, ENFIELD, draws, seed=1)
    b = _released(with_rich, ENFIELD, draws, seed=2)
    assert ((a >= 1000) & (a <= 100000)).all() and ((b >= 1000) & (b <= 100000)).all()

    # 1. privacy loss: on every region holding enough mass the two output distributions
    # differ by at most e^ε (plus sampling slack for 4000 draws)
    edges = np.unique(np.quantile(np.concatenate([a, b]), np.linspace(0, 1, 11)))
    ha, _ = np.histogram(a, edges)
    hb, _ = np.histogram(b, edges)
    for na, nb in zip(ha, hb, strict=True):
        if min(na, nb) >= 100:
            assert max(na / nb, nb / na) <= math.exp(EPSILON) * 1.3, (na, nb)

    # 2. the best threshold test on the released mean: an ε-DP release caps any test's
    # accuracy at e^ε / (1 + e^ε) ≈ 0.73
    best = 0.0
    for cut in np.quantile(np.concatenate([a, b]), np.linspace(0.01, 0.99, 99)):
        best = max(
            best, ((a < cut).mean() + (b >= cut).mean()) / 2, ((a >= cut).mean() + (b < cut).mean()) / 2
        )
    assert best <= math.exp(EPSILON) / (1 + math.exp(EPSILON)) + 0.03


def test_notes_and_shape_are_the_same_on_both_neighbours(
    tmp_path: Path, open_guard: Callable[..., Guard]
) -> None:
    """What is said besides the values depends on the policy and the query only."""
    answers = []
    for name, csv in (("a", HOSPITAL / "hospital.csv"), ("b", HOSPITAL / "hospital-rich.csv")):
        guard = open_guard(write_policy(tmp_path / name, csv=csv), state=name)
        answers.append(guard.query(ENFIELD, "alice"))
    assert answers[0].notes == answers[1].notes
    assert answers[0].flags == answers[1].flags == [["noised"]]
