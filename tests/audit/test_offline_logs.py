"""Reading query logs: CSV and JSONL files, the guard's own store; clear errors with the line."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from guard.audit.logsource import Answer, LogFileError, entries_from_store, read_log
from guard.errors import PolicyError, codes_for


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_with_quoted_multiline_sql_and_time_zones(tmp_path: Path) -> None:
    log = write(
        tmp_path,
        "q.csv",
        "Analyst, Time ,sql,extra\n"
        'alice,2024-05-01T12:00:00+02:00,"SELECT SUM(income)\nFROM students",x\n'
        "\n"
        "bob,,SELECT COUNT(*) FROM students,y\n",
    )
    first, second = read_log(log)
    assert (first.seq, first.ref, first.analyst) == (1, "q.csv:2", "alice")
    assert first.time == dt.datetime(2024, 5, 1, 10, 0) and first.sql == "SELECT SUM(income)\nFROM students"
    assert (second.seq, second.ref, second.time) == (2, "q.csv:5", None)


def test_jsonl_accepts_guard_log_output_and_skips_unanswered(tmp_path: Path) -> None:
    records = [
        {
            "id": 1,
            "ts": "2024-05-01 10:00:00.5",
            "analyst": "alice",
            "sql": "SELECT 1",
            "decision": "rejected",
        },
        {
            "id": 2,
            "ts": "2024-05-01 10:01:00",
            "analyst": "alice",
            "sql": "SELECT COUNT(*) FROM students",
            "decision": "answered",
            "data_version": "abc",
            "rows": [[9]],
            "flags": [["released"]],
        },
        {"analyst": "bob", "time": 1714557600, "sql": "SELECT SUM(income) FROM students"},
    ]
    log = write(tmp_path, "guard.log", "\n".join(json.dumps(r) for r in records) + "\n\n")
    first, second = read_log(log)  # no suffix: sniffed as JSONL
    assert (first.seq, first.ref, first.data_version) == (1, "guard.log:2", "abc")
    assert first.answer == Answer(((9,),), (("released",),))
    assert (second.ref, second.time) == ("guard.log:3", dt.datetime(2024, 5, 1, 10, 0))


def test_store_records_keep_answered_ones_with_their_answer() -> None:
    records = [
        {"id": 4, "ts": dt.datetime(2024, 5, 1), "analyst": "a", "sql": "x", "decision": "refused"},
        {
            "id": 5,
            "ts": dt.datetime(2024, 5, 2),
            "analyst": "b",
            "sql": "y",
            "decision": "answered",
            "data_version": "v1",
            "rows": [[None, 3]],
            "flags": [["released", "suppressed"]],
        },
    ]
    [entry] = entries_from_store(records)
    assert (entry.seq, entry.ref, entry.analyst, entry.time) == (
        1,
        "store record 5",
        "b",
        dt.datetime(2024, 5, 2),
    )
    assert entry.answer == Answer(((None, 3),), (("released", "suppressed"),))


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("a.csv", "", "a.csv: the file is empty"),
        ("a.csv", "who,time,sql\nalice,,SELECT 1\n", "a.csv:1: the header lacks the column(s) analyst"),
        ("a.csv", "analyst,sql\nalice,SELECT 1\n", "lacks the column(s) time (or ts)"),
        (
            "a.csv",
            "analyst,time,sql\nalice,,SELECT 1\nbob,,SELECT SUM(income), COUNT(*) FROM t\n",
            "a.csv:3: expected 3 fields (analyst, time, sql), found 4: quote SQL that contains commas",
        ),
        ("a.csv", 'analyst,time,sql\nalice,,"SELECT 1\n', "a.csv:2: malformed CSV (unexpected end of data)"),
        (
            "a.csv",
            "analyst,time,sql\nalice,yesterday,SELECT 1\n",
            "a.csv:2: time 'yesterday' is not ISO 8601",
        ),
        ("a.csv", "analyst,time,sql\n,,SELECT 1\n", "a.csv:2: analyst must be a non-empty text"),
        ("a.csv", "analyst,time,sql\nalice,, \n", "a.csv:2: sql must be a non-empty text"),
        ("a.jsonl", '{"analyst": "a", "sql": "x"}\n{"analyst": "a", "sql": \n', "a.jsonl:2: not valid JSON"),
        ("a.jsonl", "[1, 2]\n", "a.jsonl:1: expected a JSON object"),
        ("a.jsonl", '{"analyst": "a"}\n', "a.jsonl:1: the record lacks the key 'sql'"),
        ("a.jsonl", '{"analyst": "a", "sql": "x", "time": true}\n', "a.jsonl:1: time must be ISO 8601"),
    ],
)
def test_bad_logs_name_the_file_and_line(tmp_path: Path, name: str, text: str, message: str) -> None:
    with pytest.raises(LogFileError) as raised:
        read_log(write(tmp_path, name, text))
    assert message in raised.value.message
    assert str(tmp_path) in raised.value.message  # the path as given


def test_unreadable_logs(tmp_path: Path) -> None:
    with pytest.raises(LogFileError, match="cannot read the log file"):
        read_log(tmp_path / "missing.csv")
    latin = tmp_path / "latin.csv"
    latin.write_bytes("analyst,time,sql\nJosé,,SELECT 1\n".encode("latin-1"))
    with pytest.raises(LogFileError, match="not UTF-8 text"):
        read_log(latin)


def test_log_errors_are_input_errors_with_exit_code_2() -> None:
    error = LogFileError("x")
    assert isinstance(error, PolicyError) and codes_for(error).exit_code == 2
