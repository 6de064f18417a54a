"""guard query: --flags, exit code 4 when every value is withheld, lists of values."""

from __future__ import annotations

import json
from pathlib import Path

from guard.cli.main import NOTHING_RELEASED
from tests.cli.test_cli import query, run

ALL_WITHHELD = "SELECT class, COUNT(*), SUM(income) FROM students WHERE class = 1979 GROUP BY class"


def test_flags_add_a_column_after_each_aggregate(tmp_path: Path) -> None:
    sql = "SELECT sex, major, COUNT(*) FROM students GROUP BY sex, major"
    code, out, _ = query(tmp_path, sql, "--flags", "--format", "csv")
    assert code == 0
    assert out.splitlines() == [
        "sex,major,count,count_flag",
        "Female,CS,,suppressed",
        "Female,EE,,suppressed",
        "Male,CS,3,released",
        "Male,EE,3,released",
    ]


def test_every_value_withheld_warns_and_exits_4(tmp_path: Path) -> None:
    code, out, err = query(tmp_path, ALL_WITHHELD)
    assert code == NOTHING_RELEASED == 4
    assert "suppressed" in out  # the answer is still shown, with its notes
    assert "warning: every value of this answer is withheld: nothing was released" in err
    code, out, err = query(tmp_path, ALL_WITHHELD, "--format", "json", "--flags")
    assert code == 4
    answer = json.loads(out)
    assert answer["rows"] == [[1979, None, "suppressed", None, "suppressed"]]
    assert "nothing was released" in err


def test_partly_withheld_and_empty_answers_exit_0(tmp_path: Path) -> None:
    code, _, err = query(tmp_path, "SELECT sex, major, COUNT(*) FROM students GROUP BY sex, major")
    assert code == 0 and "warning" not in err
    code, out, err = query(
        tmp_path, "SELECT major, COUNT(*) FROM students WHERE class = 1900 GROUP BY major", "--format", "csv"
    )
    assert code == 0 and out.splitlines() == ["major,count"] and "warning" not in err


def test_exit_codes_are_in_the_help() -> None:
    for args in (("query", "--help"), ("--help",)):
        code, out, _ = run(*args)
        assert code == 0
        assert "4 answered" in " ".join(out.split()), out
    _, out, _ = run("query", "--help")
    assert "--flags" in out


def test_listing_values(tmp_path: Path) -> None:
    code, out, err = query(tmp_path, "SELECT DISTINCT class FROM students ORDER BY class", "--format", "csv")
    assert code == 0
    assert out.splitlines() == ["class", "1978"]
    assert "note: 3 of 4 values not listed" in err
    code, _, err = query(tmp_path, "SELECT DISTINCT income FROM students")
    assert code == 3 and "measure 'income' cannot be listed" in err
