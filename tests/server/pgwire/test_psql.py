"""psql, the reference client: queries, \\dt and \\d answered from the policy."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")


def psql(
    endpoint: object, command: str, password: str = "alice-demo", user: str = "alice"
) -> subprocess.CompletedProcess[str]:
    port = endpoint.port  # type: ignore[attr-defined]
    env = {**os.environ, "PGPASSWORD": password, "PGCONNECT_TIMEOUT": "10"}
    return subprocess.run(
        ["psql", "-X", "-h", "127.0.0.1", "-p", str(port), "-U", user, "-d", "statguard", "-c", command],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )


def test_psql_answers_a_grouped_sum(students: object) -> None:
    done = psql(students, "SELECT major, SUM(income) FROM students GROUP BY major")
    assert done.returncode == 0, done.stderr
    lines = [line.split("|") for line in done.stdout.splitlines() if "|" in line]
    assert [[cell.strip() for cell in line] for line in lines] == [
        ["major", "sum"],
        ["CS", "358000"],
        ["EE", "240000"],
    ]


def test_psql_shows_protection_notes_and_nulls(students: object) -> None:
    done = psql(students, "SELECT sex, major, SUM(income) FROM students GROUP BY sex, major")
    assert done.returncode == 0, done.stderr
    assert "NOTICE:  2 of 4 cells suppressed by the query-set-size control" in done.stderr
    rows = [line.split("|") for line in done.stdout.splitlines()[2:] if "|" in line]
    assert len(rows) == 4 and all(row[2].strip() == "" for row in rows)


def test_psql_dt_lists_the_policy_tables(students: object) -> None:
    done = psql(students, "\\dt")
    assert done.returncode == 0, done.stderr
    assert " public | students | table | statguard" in done.stdout
    assert "(1 row)" in done.stdout


def test_psql_d_table_hides_identifier_columns(students: object) -> None:
    done = psql(students, "\\d students")
    assert done.returncode == 0, done.stderr
    assert 'Table "public.students"' in done.stdout
    columns = [line.split("|")[0].strip() for line in done.stdout.splitlines()[3:] if "|" in line]
    assert columns == ["sex", "major", "class", "income"]  # no "name": it identifies students
    assert " bigint " in done.stdout


def test_psql_refusal_is_an_error_with_the_guards_message(students: object) -> None:
    done = psql(students, "SELECT name, COUNT(*) FROM students GROUP BY name")
    assert done.returncode == 1
    assert "ERROR:  column 'name' identifies respondents" in done.stderr


def test_psql_wrong_password_is_refused(students: object) -> None:
    done = psql(students, "SELECT 1", password="not-alice")
    assert done.returncode == 2
    assert 'password authentication failed for user "alice"' in done.stderr


def test_psql_d_unknown_table_finds_nothing(students: object) -> None:
    done = psql(students, "\\d nosuch")
    assert "Did not find any relation named" in done.stderr
