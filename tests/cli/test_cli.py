"""The command line: output formats, exit codes 0 / 3 / 2, and no tracebacks."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from guard.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
STUDENTS = str(ROOT / "policies/students.yaml")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def query(state: Path, sql: str, *extra: str) -> tuple[int, str, str]:
    return run("query", "--policy", STUDENTS, "--analyst", "alice", "--state", str(state), *extra, sql)


def test_answer_as_json_is_the_contract(tmp_path: Path) -> None:
    code, out, _ = query(
        tmp_path, "SELECT major, SUM(income) FROM students GROUP BY major", "--format", "json"
    )
    assert code == 0
    assert json.loads(out) == {
        "status": "answered",
        "columns": ["major", "sum"],
        "rows": [["CS", 358000], ["EE", 240000]],
        "flags": [["released", "released"], ["released", "released"]],
        "notes": [],
    }


def test_table_and_csv(tmp_path: Path) -> None:
    code, out, _ = query(tmp_path, "SELECT sex, major, COUNT(*) FROM students GROUP BY sex, major")
    assert code == 0 and "suppressed" in out and "query-set-size control" in out
    code, out, err = query(
        tmp_path, "SELECT sex, major, COUNT(*) FROM students GROUP BY 1, 2", "--format", "csv"
    )
    assert code == 0
    assert out.splitlines() == ["sex,major,count", "Female,CS,", "Female,EE,", "Male,CS,3", "Male,EE,3"]
    assert "note: 2 of 4 cells suppressed" in err


@pytest.mark.parametrize(
    ("sql", "error", "fragment"),
    [
        ("SELECT * FROM students", "QueryRejected", "SELECT * is not allowed"),
        ("SELECT income FROM students WHERE name = 'Baker'", "QueryRejected", "cannot be output row by row"),
        ("SELECT SUM(income) FROM students WHERE name = 'Baker'", "QueryRejected", "identifies respondents"),
        ("SELECT COUNT(*) FROM read_csv('/etc/passwd')", "QueryRejected", "table functions"),
        (
            "SELECT COUNT(*) FROM students WHERE major = 'EE' AND sex = 'Female'",
            "QueryRefused",
            "fewer than k=3",
        ),
    ],
)
def test_refusals_exit_3(tmp_path: Path, sql: str, error: str, fragment: str) -> None:
    code, out, err = query(tmp_path, sql)
    assert code == 3 and out == ""
    assert err.startswith(f"refused ({error}): ") and fragment in err
    code, out, _ = query(tmp_path, sql, "--format", "json")
    document = json.loads(out)
    assert code == 3 and document["status"] == "refused" and document["error"] == error
    assert fragment in document["reason"]


def test_usage_and_policy_errors_exit_2(tmp_path: Path) -> None:
    code, _, err = run("query", "--policy", str(tmp_path / "none.yaml"), "--analyst", "a", "SELECT 1")
    assert code == 2 and "cannot read the policy file" in err and "Traceback" not in err
    code, _, _ = run("query", "--analyst", "alice", "SELECT 1")
    assert code == 2  # missing --policy
    bad = tmp_path / "bad.yaml"
    bad.write_text("tables: {}\nanalysts: {alice: {}}\n")
    code, _, err = run("check-policy", str(bad))
    assert code == 2 and "bad.yaml: tables: expected a mapping" in err


def test_unknown_analyst_exits_3(tmp_path: Path) -> None:
    code, _, err = run(
        "query",
        "--policy",
        STUDENTS,
        "--analyst",
        "mallory",
        "--state",
        str(tmp_path),
        "SELECT COUNT(*) FROM students",
    )
    assert code == 3 and "unknown analyst 'mallory'" in err


def test_check_policy_summarises(tmp_path: Path) -> None:
    code, out, _ = run("check-policy", STUDENTS, "--state", str(tmp_path))
    assert code == 0
    for fragment in ("students", "is valid", "k = 3", "privacy unit", "income", "9 rows", "alice"):
        assert fragment in out


def test_log_shows_and_verifies(tmp_path: Path) -> None:
    query(tmp_path, "SELECT major, SUM(income) FROM students GROUP BY major")
    query(tmp_path, "SELECT * FROM students")
    code, out, err = run("log", "--policy", STUDENTS, "--state", str(tmp_path), "--verify")
    assert code == 0 and "answered" in out and "rejected" in out and "hash chain intact over 2 records" in err
    code, out, _ = run(
        "log", "--policy", STUDENTS, "--state", str(tmp_path), "--format", "json", "--analyst", "alice"
    )
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["decision"] for r in records] == ["answered", "rejected"]


def test_demo_runs(tmp_path: Path) -> None:
    code, out, _ = run("demo", "--state", str(tmp_path), "--policies", str(ROOT / "policies"))
    assert code == 0
    assert "358,000" in out and "QueryRefused" in out and "hash chain intact" in out


GUARD = shutil.which("guard", path=str(Path(sys.executable).parent)) or shutil.which("guard")


@pytest.mark.skipif(GUARD is None, reason="console script not installed")
def test_console_script(tmp_path: Path) -> None:
    assert GUARD is not None
    done = subprocess.run(
        [
            GUARD,
            "query",
            "--policy",
            STUDENTS,
            "--analyst",
            "alice",
            "--state",
            str(tmp_path),
            "--format",
            "json",
            "SELECT COUNT(*) FROM read_csv('/etc/passwd')",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 3 and json.loads(done.stdout)["error"] == "QueryRejected"
    assert "Traceback" not in done.stderr


def test_explain_shows_intervals_and_releases_nothing(tmp_path: Path) -> None:
    castro = str(ROOT / "policies/castro.yaml")
    sql = "SELECT municipality, profession, SUM(salary) FROM castro GROUP BY CUBE (municipality, profession)"
    code, out, _ = run("explain", "--policy", castro, "--analyst", "alice", "--state", str(tmp_path), sql)
    assert code == 0
    assert "withheld and sensitive" in out and "profession=P3" in out
    assert "primary" in out and "secondary" in out and " NO " not in out
    code, out, _ = run("log", "--policy", castro, "--state", str(tmp_path), "--format", "json")
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["decision"] for r in records] == ["explained"] and records[0]["rows"] is None
    # nothing was released: a later margin by municipality is answered in full
    code, out, _ = run(
        "query",
        "--policy",
        castro,
        "--analyst",
        "alice",
        "--state",
        str(tmp_path),
        "--format",
        "json",
        "SELECT municipality, SUM(salary) FROM castro GROUP BY municipality",
    )
    assert code == 0 and None not in [row[1] for row in json.loads(out)["rows"]]
