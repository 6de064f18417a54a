"""A 0/1 measure (a diagnosis flag) asked about over many overlapping groups (issue 16,
family 3): exact sums let a linear program over [0, 1]^n pin every flag (Dinur & Nissim).
Exact mode stops there: a measure whose range is at most 1 wide is answered with noise
unless the policy says otherwise, and a policy that gives analysts no budget for it does
not load (the message says why and what to change).

The attack is run against a pass-through (exact sums from the data) to show it is real,
then against the guard with shipped defaults and with a budget."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.optimize import linprog

from guard import Guard, GuardError
from guard.errors import PolicyError
from guard.noise.sampling import InsecureSeededSource

PEOPLE = 40
QUERIES = 34


def _data(tmp_path: Path, seed: int = 3) -> tuple[Path, list[int]]:
    rng = random.Random(seed)
    flags = [rng.randint(0, 1) for _ in range(PEOPLE)]
    lines = ["person,dept,hire_year,flag"]
    lines += [f"p{i},7,{1980 + i},{flags[i]}" for i in range(PEOPLE)]
    lines += [f"q{i},{1 + i % 5},{1980 + i % 40},{rng.randint(0, 1)}" for i in range(200)]
    path = tmp_path / "staff.csv"
    path.write_text("\n".join(lines) + "\n")
    return path, flags


def _policy(tmp_path: Path, data: Path, noise: dict[str, object] | None, flag: dict[str, object]) -> Path:
    document: dict[str, object] = {
        "name": "staff",
        "protection": {"min_query_set_size": 3},
        "tables": {
            "staff": {
                "source": {"csv": str(data)},
                "privacy_unit": "person",
                "columns": {
                    "person": {"role": "identifier"},
                    "dept": {"role": "dimension"},
                    "hire_year": {"role": "dimension"},
                    "flag": {"role": "measure", "bounds": [0, 1], **flag},
                },
            }
        },
        "analysts": {"alice": {}},
    }
    if noise is not None:
        document["noise"] = noise
    path = tmp_path / "staff.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _subsets(seed: int = 11) -> list[list[int]]:
    rng = random.Random(seed)
    return [sorted(rng.sample(range(PEOPLE), PEOPLE // 2)) for _ in range(QUERIES)]


def _sql(subset: list[int]) -> str:
    years = ", ".join(str(1980 + i) for i in subset)
    return f"SELECT SUM(flag) FROM staff WHERE dept = 7 AND hire_year IN ({years})"


def _pinned(answers: list[tuple[list[int], float]], slack: float = 0.0) -> int:
    """Flags an LP over [0, 1]^n pins (its interval narrower than 0.5) given the answers,
    each trusted up to ``slack``."""
    if not answers:
        return 0
    matrix = np.zeros((len(answers), PEOPLE))
    for row, (subset, _) in enumerate(answers):
        matrix[row, subset] = 1.0
    values = np.array([value for _, value in answers])
    a_ub = np.vstack([matrix, -matrix])
    b_ub = np.concatenate([values + slack, -(values - slack)])
    pinned = 0
    for i in range(PEOPLE):
        c = np.zeros(PEOPLE)
        c[i] = 1.0
        low = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=(0, 1), method="highs")
        high = linprog(-c, A_ub=a_ub, b_ub=b_ub, bounds=(0, 1), method="highs")
        if low.status != 0 or high.status != 0:
            continue  # no consistent assignment: the attacker learns nothing certain
        if -high.fun - low.fun < 0.5:
            pinned += 1
    return pinned


def test_exact_sums_pin_the_flags_through_a_pass_through(tmp_path: Path) -> None:
    _, flags = _data(tmp_path)
    answers = [(s, float(sum(flags[i] for i in s))) for s in _subsets()]
    assert _pinned(answers) >= PEOPLE * 3 // 4  # the attack is real


def test_defaults_without_a_budget_do_not_load_and_say_why(tmp_path: Path) -> None:
    data, _ = _data(tmp_path)
    with pytest.raises(PolicyError) as caught:
        Guard.open(_policy(tmp_path, data, None, {}), state=tmp_path / "state")
    message = caught.value.message
    assert "staff.flag has a range at most 1 wide" in message
    assert "noise.budgets.per_analyst" in message and "noise: off" in message


@pytest.mark.parametrize("seed", [1, 2])
def test_with_a_budget_the_answers_are_noisy_and_pin_nothing(tmp_path: Path, seed: int) -> None:
    data, flags = _data(tmp_path)
    noise = {"epsilon_per_query": 1, "budgets": {"per_analyst": 10, "global": 20}}
    path = _policy(tmp_path, data, noise, {})
    with Guard.open(path, state=tmp_path / "state", rng=InsecureSeededSource(seed)) as guard:
        answers = []
        refused = 0
        for subset in _subsets():
            try:
                result = guard.query(_sql(subset), analyst="alice")
            except GuardError:
                refused += 1
                continue
            assert result.flags == [["noised"]]
            answers.append((subset, float(result.rows[0][0])))
    assert refused > 0 and len(answers) <= 10  # the budget bounds what can be asked
    with Guard.open(path, state=tmp_path / "state") as guard:  # counts stay exact: no flag read
        count = guard.query("SELECT COUNT(*) FROM staff WHERE dept = 7", analyst="alice")
        assert count.rows == [[PEOPLE]] and count.flags == [["released"]]
    # even trusting each noisy answer to within one noise scale, nothing is pinned
    assert _pinned(answers, slack=1.0) == 0
    # and rounding a least-squares fit recovers no more than a coin toss would, give or take
    matrix = np.zeros((len(answers), PEOPLE))
    for row, (subset, _) in enumerate(answers):
        matrix[row, subset] = 1.0
    fit = np.linalg.lstsq(matrix, np.array([v for _, v in answers]), rcond=None)[0]
    assert np.mean((fit > 0.5).astype(int) == np.array(flags)) < 0.9


def test_a_steward_can_answer_a_flag_exactly_and_is_warned(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from guard.cli.main import main

    data, _ = _data(tmp_path)
    path = _policy(tmp_path, data, None, {"noise": "off"})
    result = CliRunner().invoke(main, ["check-policy", str(path), "--state", str(tmp_path / "state")])
    assert result.exit_code == 0
    assert "WARNING: flag has a narrow range and is answered exactly" in result.output
    with Guard.open(path, state=tmp_path / "state") as guard:
        answer = guard.query(_sql(_subsets()[0]), analyst="alice")
        assert answer.flags == [["released"]]


def test_the_default_is_explained_by_check_policy(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from guard.cli.main import main

    data, _ = _data(tmp_path)
    noise = {"budgets": {"per_analyst": 5}}
    result = CliRunner().invoke(
        main, ["check-policy", str(_policy(tmp_path, data, noise, {})), "--state", str(tmp_path / "s")]
    )
    assert result.exit_code == 0, result.output
    assert "flag: answered with noise by default" in result.output
