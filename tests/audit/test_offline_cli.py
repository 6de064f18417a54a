"""``guard audit``: the Baker pair in three kinds of log, reports, JSON schema, exit codes."""

from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from guard import Guard
from guard.audit.report import SCHEMA
from guard.cli.audit_cmd import audit
from guard.cli.main import main
from guard.state.records import LogRecord, Outcome
from guard.state.store import StateStore

ROOT = Path(__file__).resolve().parents[2]
STUDENTS = str(ROOT / "policies" / "students.yaml")
EE = "SELECT SUM(income) FROM students WHERE major = 'EE'"
MALE_EE = "SELECT SUM(income) FROM students WHERE major = 'EE' AND sex = 'Male'"
BY_SEX_AND_MAJOR = "SELECT sex, major, COUNT(*) FROM students GROUP BY sex, major"


def run(state: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(audit, ["--policy", STUDENTS, "--state", str(state), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def audit_json(state: Path, *args: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = run(state, "--json", *args)
    return code, json.loads(out)


def baker(document: dict[str, Any]) -> dict[str, Any]:
    [found] = [g for g in document["determined"] if g["disclosure"]]
    return found


def assert_baker_pair(document: dict[str, Any], refs: list[str]) -> None:
    found = baker(document)
    assert (found["space"], found["units"], found["rows"]) == ("sum(income)", 1, 1)
    assert found["description"] == {"sex": "Female", "major": "EE", "class": 1980}
    assert found["entries"] == [1, 2] and found["analysts"] == ["alice", "bob"] and found["collusion"]
    entries = {e["seq"]: e for e in document["entries"]}
    assert [entries[s]["sql"] for s in found["entries"]] == [EE, MALE_EE]
    assert [entries[s]["ref"] for s in found["entries"]] == refs


def test_baker_pair_in_a_csv_log(tmp_path: Path) -> None:
    log = tmp_path / "other.csv"
    log.write_text(f"analyst,time,sql\nalice,2024-05-01T10:00:00Z,{EE}\nbob,2024-05-01T11:00:00Z,{MALE_EE}\n")
    code, document = audit_json(tmp_path / "state", "--log", str(log))
    assert code == 3
    assert_baker_pair(document, ["other.csv:2", "other.csv:3"])


def test_baker_pair_in_a_jsonl_log_with_summary_output(tmp_path: Path) -> None:
    log = tmp_path / "other.jsonl"
    lines = [
        {"analyst": "alice", "ts": 1714550400, "sql": EE},
        {"analyst": "bob", "ts": 1714554000, "sql": MALE_EE},
    ]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    code, document = audit_json(tmp_path / "state", "--log", str(log))
    assert code == 3
    assert_baker_pair(document, ["other.jsonl:1", "other.jsonl:2"])
    code, out, _ = run(tmp_path / "state", "--log", str(log))
    assert code == 3 and "1 disclosure(s)" in out and "alice, bob" in out and "yes" in out
    assert "50000" not in out and "50,000" not in out


def test_baker_pair_in_the_guards_own_log(tmp_path: Path) -> None:
    # answered by a guard without history control: written as such, since this guard's
    # linked-table protection would refuse the second query
    state = tmp_path / "state"
    store = StateStore(state)
    store.append(LogRecord(analyst="alice", sql="SELECT COUNT(*) FROM students", decision=Outcome.REFUSED))
    store.append(LogRecord(analyst="alice", sql=EE, decision=Outcome.ANSWERED, data_version="0ld"))
    store.append(LogRecord(analyst="bob", sql=MALE_EE, decision=Outcome.ANSWERED))
    store.close()
    code, document = audit_json(state)
    assert code == 3
    assert_baker_pair(document, ["store record 2", "store record 3"])
    assert document["summary"]["entries"] == 2 and "the guard's log" in document["log"]
    first, second = document["entries"]
    assert (
        first["notes"] == [first["notes"][0]]
        and "answered on data version 0ld, replayed on" in first["notes"][0]
    )
    assert second["notes"] == []


def test_cells_the_guard_withheld_are_not_counted(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with Guard.open(STUDENTS, state=state) as guard:
        guard.query(BY_SEX_AND_MAJOR, analyst="alice")  # the two female cells are suppressed
        guard.query("SELECT sex, COUNT(*) FROM students GROUP BY sex", analyst="bob")
    code, document = audit_json(state)
    assert code == 0 and document["summary"]["disclosures"] == 0
    assert [e["cells"] for e in document["entries"]] == [2, 2]
    # the same answers without suppression (another system) isolate the female EE student
    exported = CliRunner().invoke(
        main, ["log", "--policy", STUDENTS, "--state", str(state), "--format", "json"]
    )
    bare = tmp_path / "bare.jsonl"
    bare.write_text(
        "".join(
            json.dumps({k: r[k] for k in ("analyst", "ts", "sql")}) + "\n"
            for r in map(json.loads, exported.stdout.splitlines())
        )
    )
    code, document = audit_json(state, "--log", str(bare))
    assert code == 3 and sorted(g["units"] for g in document["determined"] if g["disclosure"]) == [1, 2]
    # the guard's own export keeps the flags: same verdict as the store
    full = tmp_path / "full.jsonl"
    full.write_text(exported.stdout)
    code, document = audit_json(state, "--log", str(full))
    assert code == 0 and [e["cells"] for e in document["entries"]] == [2, 2]


def test_harmless_log_exits_0(tmp_path: Path) -> None:
    log = tmp_path / "ok.csv"
    log.write_text(
        "analyst,time,sql\n"
        'alice,,"SELECT major, SUM(income) FROM students GROUP BY major"\n'
        "bob,,SELECT SUM(income) FROM students\n"
    )
    code, out, _ = run(tmp_path / "state", "--log", str(log))
    assert code == 0 and "no disclosure" in out and "2 replayed, 0 not replayable" in out


def test_malformed_log_exits_2_with_the_line(tmp_path: Path) -> None:
    log = tmp_path / "bad.csv"
    log.write_text(
        f"analyst,time,sql\nalice,,{EE}\nbob,,SELECT major, COUNT(*) FROM students GROUP BY major\n"
    )
    code, out, err = run(tmp_path / "state", "--log", str(log))
    assert code == 2 and out == ""
    assert err.startswith("error (") and "bad.csv:3: expected 3 fields (analyst, time, sql), found 4" in err
    assert "Traceback" not in err


def test_not_replayable_entries_are_reported(tmp_path: Path) -> None:
    log = tmp_path / "mixed.csv"
    log.write_text(f"analyst,time,sql\nalice,,{EE}\nmallory,,SELECT * FROM students\nbob,,{MALE_EE}\n")
    code, document = audit_json(tmp_path / "state", "--log", str(log), "--out", str(tmp_path / "out"))
    assert code == 3 and document["summary"]["not_replayable"] == 1
    [skipped] = [e for e in document["entries"] if e["status"] == "not_replayable"]
    assert skipped["seq"] == 2 and "SELECT * is not allowed" in skipped["reason"]
    assert baker(document)["entries"] == [1, 3]
    markdown = (tmp_path / "out" / "audit.md").read_text()
    assert "## Not replayable (1)" in markdown and "SELECT * is not allowed" in markdown


def test_json_schema_is_stable(tmp_path: Path) -> None:
    log = tmp_path / "log.csv"
    log.write_text(f"analyst,time,sql\nalice,2024-05-01T10:00:00,{EE}\nbob,2024-05-01T11:00:00,{MALE_EE}\n")
    code, document = audit_json(tmp_path / "state", "--log", str(log))
    assert code == 3
    assert list(document) == [
        "schema",
        "policy",
        "log",
        "generated",
        "k",
        "summary",
        "determined",
        "entries",
        "timeline",
    ]
    assert document["schema"] == SCHEMA == "statguard-audit/1"
    assert (document["policy"], document["k"]) == ("students", 3)
    assert document["summary"] == {
        "entries": 2,
        "replayed": 2,
        "not_replayable": 0,
        "cells": 2,
        "determined": 3,
        "disclosures": 1,
        "collusions": 1,
        "analysts": ["alice", "bob"],
    }
    assert list(baker(document)) == [
        "number", "table", "space", "rows", "units", "disclosure", "determined_at",
        "entries", "cells", "analysts", "collusion", "description",
    ]  # fmt: skip
    assert baker(document)["cells"] == [{"seq": 1, "cell": "all rows"}, {"seq": 2, "cell": "all rows"}]
    assert list(document["entries"][0]) == [
        "seq", "ref", "time", "analyst", "sql", "status", "reason", "table", "cells",
        "informative", "determined", "disclosures", "notes",
    ]  # fmt: skip
    second = document["entries"][1]
    assert second["time"] == "2024-05-01T11:00:00" and second["disclosures"] == [baker(document)["number"]]
    assert set(second["disclosures"]) < set(second["determined"])
    assert document["timeline"] == [
        {"seq": 1, "time": "2024-05-01T10:00:00", "disclosures": 0, "determined": 1},
        {"seq": 2, "time": "2024-05-01T11:00:00", "disclosures": 1, "determined": 3},
    ]


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_reports_hold_the_chart(tmp_path: Path, fmt: str) -> None:
    log = tmp_path / "log.csv"
    log.write_text(f"analyst,time,sql\nalice,2024-05-01T10:00:00,{EE}\nbob,2024-05-02T10:00:00,{MALE_EE}\n")
    out = tmp_path / "out"
    code, _, err = run(tmp_path / "state", "--log", str(log), "--out", str(out), "--format", fmt, "--quiet")
    assert code == 3 and f"reports written to {out}" in err
    written = json.loads((out / "audit.json").read_text())
    assert written["schema"] == SCHEMA and written["summary"]["disclosures"] == 1
    if fmt == "md":
        report = (out / "audit.md").read_text()
        assert "![cumulative disclosures over the log](audit.svg)" in report and "```text" in report
        row = "| sum(income) | 1 | sex='Female', major='EE', class=1980 | #1, #2 | alice, bob | yes |"
        assert row in report
        svg = ET.fromstring((out / "audit.svg").read_text())
    else:
        raw = (out / "audit.html").read_text()
        svg = ET.fromstring(raw[raw.index("<svg") : raw.index("</svg>") + len("</svg>")])
        report = html.unescape(raw)
    assert "Disclosure" in report and "sex='Female', major='EE'" in report
    assert EE in report and "alice" in report and "bob" in report
    assert "50000" not in report and "240000" not in report and "190000" not in report
    ns = "{http://www.w3.org/2000/svg}"
    [path] = svg.iter(f"{ns}path")
    assert path.get("d", "").startswith("M") and len(list(svg.iter(f"{ns}circle"))) == 1  # one step up
    assert any(t.text == "log time (UTC)" for t in svg.iter(f"{ns}text"))
