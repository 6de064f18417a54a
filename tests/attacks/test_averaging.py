"""The averaging attack on noisy answers fails.

An analyst who may repeat a differencing pair n times and average it shrinks the noise
by √n: SmartNoise SQL lets about 33 pairs reveal a target's sex with 95 % confidence,
because its budget only reports. Here the pair is
    SUM(income) over everyone  -  SUM(income) outside Enfield  =  Enfield's total,
asked 100 times in rotating phrasings, by one analyst and by two who pool their answers.
The guard returns the same draw for every phrasing of one cell (at no cost), charges
phrasings that select the same rows only because of the data as new questions, and
refuses once the budget is spent: the averaged estimate is never better than one pair.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from guard import Guard
from guard.errors import BudgetExhausted

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "policies" / "hospital-dp.yaml"
TRUE_ENFIELD_TOTAL = 33_000

EVERYONE = (
    "SELECT SUM(income) FROM hospital",
    "SELECT sum(income) AS total FROM hospital",
    "SELECT SUM(INCOME) FROM hospital LIMIT 5",
)
OUTSIDE_ENFIELD = (
    "SELECT SUM(income) FROM hospital WHERE town <> 'Enfield'",
    "SELECT SUM(income) FROM hospital WHERE 'Enfield' <> town",
    "SELECT SUM(income) FROM hospital WHERE town != 'Enfield' AND town <> 'Enfield'",
)


def _pair_estimates(guard: Guard, analysts: tuple[str, ...], rounds: int) -> list[float]:
    estimates = []
    phrasings = itertools.cycle(zip(EVERYONE, OUTSIDE_ENFIELD, strict=True))
    for i in range(rounds):
        everyone, outside = next(phrasings)
        analyst = analysts[i % len(analysts)]
        total = guard.query(everyone, analyst).rows[0][0]
        rest = guard.query(outside, analyst).rows[0][0]
        estimates.append(total - rest)
    return estimates


@pytest.mark.slow
def test_repeating_the_pair_100_times_does_not_reduce_the_error(tmp_path: Path) -> None:
    for trial in range(4):  # independent noise in each store
        with Guard.open(POLICY, state=tmp_path / f"s{trial}") as guard:
            estimates = _pair_estimates(guard, ("alice",), rounds=100)
            single_error = abs(estimates[0] - TRUE_ENFIELD_TOTAL)
            averaged_error = abs(sum(estimates) / len(estimates) - TRUE_ENFIELD_TOTAL)
            assert averaged_error == pytest.approx(single_error)
            assert len(set(estimates)) == 1
            assert guard.budget("alice")["accounts"][1]["spent"]["exact"] == "2"


def test_colluding_analysts_pool_the_same_draws(tmp_path: Path) -> None:
    with Guard.open(POLICY, state=tmp_path / "s") as guard:
        estimates = _pair_estimates(guard, ("alice", "bob"), rounds=20)
        assert len(set(estimates)) == 1
        spent = {a["account"]: a["spent"]["exact"] for a in guard.budget()["accounts"]}
        assert spent["global"] == "2"  # the data paid for two draws, whoever asked


def test_data_coincident_rephrasings_are_paid_for_until_the_budget_stops_them(tmp_path: Path) -> None:
    """`town IN (the five other towns)` selects the same rows as `town <> 'Enfield'` only
    because of the data. Sharing a draw would confirm that equality (a set-equality
    oracle), so each is a new question: paid, and refused when the budget is spent."""
    others = ["Barnet", "Camden", "Hackney", "Haringey", "Islington"]
    extra = ["Atlantis", "Avalon", "Camelot", "Eldorado", "Erewhon", "Lilliput", "Utopia", "Xanadu", "Zion"]
    with Guard.open(POLICY, state=tmp_path / "s") as guard:
        answers = [
            guard.query("SELECT SUM(income) FROM hospital WHERE town <> 'Enfield'", "alice").rows[0][0]
        ]
        refused = 0
        for name in extra:
            towns = ", ".join(f"'{t}'" for t in [*others, name])
            try:
                answers.append(
                    guard.query(f"SELECT SUM(income) FROM hospital WHERE town IN ({towns})", "alice")
                )
            except BudgetExhausted:
                refused += 1
        assert len(answers) == 10 and refused == len(extra) + 1 - 10
        with pytest.raises(BudgetExhausted, match="ε = 0 of 10 left"):
            guard.query("SELECT SUM(income) FROM hospital WHERE town IN ('Barnet', 'Zz')", "alice")
