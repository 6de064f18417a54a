"""`guard budget` and the noise lines of `guard query` / `guard check-policy`."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from guard.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
DP = str(ROOT / "policies/hospital-dp.yaml")
ENFIELD = "SELECT AVG(income) FROM hospital WHERE town = 'Enfield'"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_budget_shows_accounts_and_charges(tmp_path: Path) -> None:
    state = str(tmp_path)
    code, out, _ = run(
        "query", "--policy", DP, "--analyst", "alice", "--state", state, "--format", "json", ENFIELD
    )
    assert code == 0 and json.loads(out)["flags"] == [["noised"]]
    code, out, _ = run("budget", "--policy", DP, "--state", state, "--format", "json")
    report = json.loads(out)
    assert code == 0
    assert [(a["account"], a["spent"]["exact"], a["remaining"]["exact"]) for a in report["accounts"]] == [
        ("global", "1", "19"),
        ("analyst:alice", "1", "9"),
        ("analyst:bob", "0", "10"),
    ]
    assert [(c["analyst"], c["epsilon"]["exact"], c["sql"]) for c in report["charges"]] == [
        ("alice", "1", ENFIELD)
    ]
    code, out, _ = run("budget", "--policy", DP, "--state", state, "--analyst", "bob")
    assert code == 0 and "analyst:bob" in out and "analyst:alice" not in out and "charges (0)" in out


def test_budget_exhausted_exits_3_with_what_is_left(tmp_path: Path) -> None:
    state = str(tmp_path)
    for i in range(10):
        sql = f"SELECT COUNT(*) FROM hospital WHERE town IN ('Enfield', 'T{i}')"
        assert run("query", "--policy", DP, "--analyst", "bob", "--state", state, sql)[0] == 0
    code, out, _ = run(
        "query", "--policy", DP, "--analyst", "bob", "--state", state, "--format", "json", ENFIELD
    )
    assert code == 3
    refusal = json.loads(out)
    assert refusal["error"] == "BudgetExhausted" and "ε = 0 of 10 left" in refusal["reason"]


def test_budget_of_a_policy_without_noise_is_a_policy_error(tmp_path: Path) -> None:
    code, out, err = run("budget", "--policy", str(ROOT / "policies/students.yaml"), "--state", str(tmp_path))
    assert code == 2 and "no privacy budgets" in out + err


def test_check_policy_summarises_noise(tmp_path: Path) -> None:
    code, out, _ = run("check-policy", DP, "--state", str(tmp_path))
    assert code == 0 and "ε 1 per query" in out and "per analyst 10, global 20" in out
