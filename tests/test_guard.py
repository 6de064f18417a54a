"""The query path end to end: answers, the k and N-k bounds, results, access, the log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from guard import AccessDenied, BackendError, Guard, QueryRefused, QueryRejected
from guard.errors import codes_for

POLICIES = Path(__file__).resolve().parent.parent / "policies"

ROOT = Path(__file__).resolve().parent.parent
INCOMES = {68000, 50000, 70000, 80000, 60000, 76000, 64000}


def test_seed_answer(students: Guard) -> None:
    result = students.query("SELECT major, SUM(income) FROM students GROUP BY major", analyst="alice")
    assert result.columns == ["major", "sum"]
    assert result.rows == [["CS", 358000], ["EE", 240000]]
    assert result.flags == [["released", "released"]] * 2
    assert result.notes == []
    assert isinstance(result.rows[0][1], int)  # HUGEINT became a plain int


def test_contract_json(students: Guard) -> None:
    result = students.query("SELECT major, AVG(income) AS mean FROM students GROUP BY major", analyst="alice")
    document = json.loads(result.to_json())
    assert document == {
        "status": "answered",
        "columns": ["major", "mean"],
        "rows": [["CS", 71600.0], ["EE", 60000.0]],
        "flags": [["released", "released"], ["released", "released"]],
        "notes": [],
    }
    frame = result.to_pandas()
    assert list(frame.columns) == ["major", "mean"] and frame["mean"].tolist() == [71600.0, 60000.0]
    assert frame.attrs["flags"] == result.flags


class TestQuerySetSize:
    """k = 3 and N = 9 on the students table: released iff 3 <= |QS| <= 6, or |QS| = 9."""

    @pytest.mark.parametrize(
        ("where", "size"),
        [
            ("major = 'EE' AND sex = 'Female'", 1),  # Baker alone
            ("sex = 'Female'", 3),
            ("class = 1978", 4),
            ("class IN (1978, 1979)", 5),
            ("major = 'CS' AND class >= 1978", 5),
            ("class <> 1981", 7),
            ("class <> 1979", 8),
            ("class > 1900", 9),
            ("class = 1979", 1),
            ("class IN (1979, 1981)", 3),
            ("class > 2000", 0),
        ],
    )
    def test_single_cell_bounds(self, students: Guard, where: str, size: int) -> None:
        sql = f"SELECT COUNT(*) FROM students WHERE {where}"
        if 3 <= size <= 6 or size == 9:
            assert students.query(sql, analyst="alice").rows == [[size]]
        else:
            with pytest.raises(QueryRefused) as caught:
                students.query(sql, analyst="alice")
            message = caught.value.message
            assert "query-set-size control" in message
            expected = (
                "fewer than k=3 respondents;" if size < 3 else "leaves fewer than k=3 respondents outside"
            )
            assert expected in message
            assert str(size) not in message.replace("k=3", "")  # the size itself is never told

    def test_strict_textbook_bound(self, tmp_path: Path) -> None:
        document = yaml.safe_load((ROOT / "policies/students.yaml").read_text())
        document["tables"]["students"]["source"]["csv"] = str(ROOT / "examples/students/students.csv")
        document["protection"]["allow_full_population"] = False
        policy = tmp_path / "strict.yaml"
        policy.write_text(yaml.safe_dump(document))
        with (
            Guard.open(policy, state=tmp_path / "s") as guard,
            pytest.raises(QueryRefused, match="outside it"),
        ):
            guard.query("SELECT COUNT(*) FROM students", analyst="alice")

    def test_groups_below_k_are_suppressed(self, students: Guard) -> None:
        result = students.query(
            "SELECT sex, major, COUNT(*) AS n, SUM(income) AS s FROM students GROUP BY sex, major",
            analyst="alice",
        )
        assert result.rows == [
            ["Female", "CS", None, None],
            ["Female", "EE", None, None],
            ["Male", "CS", 3, 210000],
            ["Male", "EE", 3, 190000],
        ]
        assert result.flags[0] == ["released", "released", "suppressed", "suppressed"]
        assert result.flags[2] == ["released"] * 4
        assert result.notes == [
            "4 of 8 cells suppressed by the query-set-size control (each released cell needs at "
            "least k=3 respondents and at least 3 outside it)"
        ]

    def test_group_above_n_minus_k_is_suppressed(self, students: Guard, tmp_path: Path) -> None:
        result = students.query("SELECT sex, COUNT(*) FROM students GROUP BY sex", analyst="alice")
        assert result.rows == [["Female", 3], ["Male", 6]]
        on_its_own = "SELECT sex, COUNT(*) FROM students WHERE class <> 1979 GROUP BY sex"
        with Guard.open(POLICIES / "students.yaml", state=tmp_path / "fresh") as fresh:
            assert fresh.query(on_its_own, analyst="alice").rows == [["Female", 3], ["Male", 5]]
        # after the first answer, Male 5 would tell how many male students enrolled in 1979
        # (one): the history audit withholds it
        result = students.query(on_its_own, analyst="alice")
        assert result.rows == [["Female", 3], ["Male", None]]
        assert "history audit" in result.notes[-1]

    def test_counted_per_privacy_unit_not_row(self, tmp_path: Path) -> None:
        """Two rows of one person are one respondent: 4 rows of 2 people are refused."""
        data = tmp_path / "visits.csv"
        rows = ["pid,ward,cost"] + [f"P{i % 2},A,{100 + i}" for i in range(4)]
        rows += [f"Q{i},B,{200 + i}" for i in range(5)] + [f"R{i},C,{300 + i}" for i in range(5)]
        data.write_text("\n".join(rows) + "\n")
        policy = tmp_path / "visits.yaml"
        policy.write_text(
            yaml.safe_dump(
                {
                    "tables": {
                        "visits": {
                            "source": {"csv": str(data)},
                            "privacy_unit": "pid",
                            "columns": {
                                "pid": {"role": "identifier"},
                                "ward": {"role": "dimension"},
                                "cost": {"role": "measure", "bounds": [0, 1000]},
                            },
                        }
                    },
                    "analysts": {"alice": {}},
                }
            )
        )
        with Guard.open(policy, state=tmp_path / "s") as guard:
            assert not guard.backend.table_info("visits").one_row_per_unit
            result = guard.query(
                "SELECT ward, COUNT(*), SUM(cost) FROM visits GROUP BY ward", analyst="alice"
            )
            assert result.rows[0] == ["A", None, None]  # 4 rows but only 2 people
            assert result.rows[1] == ["B", 5, 1010]
            with pytest.raises(QueryRefused):
                guard.query("SELECT COUNT(*) FROM visits WHERE ward = 'A'", analyst="alice")


def test_order_by_uses_protected_values(students: Guard) -> None:
    """Suppressed cells sort as NULL: ordering never reveals how hidden values compare."""
    result = students.query(
        "SELECT sex, major, SUM(income) AS s FROM students GROUP BY 1, 2 ORDER BY s DESC LIMIT 3",
        analyst="alice",
    )
    assert result.rows == [["Male", "CS", 210000], ["Male", "EE", 190000], ["Female", "CS", None]]
    result = students.query(
        "SELECT sex, major, SUM(income) AS s FROM students GROUP BY ALL ORDER BY 3 NULLS FIRST, major DESC",
        analyst="alice",
    )
    assert [row[:2] for row in result.rows] == [
        ["Female", "EE"],
        ["Female", "CS"],
        ["Male", "EE"],
        ["Male", "CS"],
    ]


def test_unknown_analyst(students: Guard) -> None:
    with pytest.raises(AccessDenied, match="unknown analyst 'mallory'"):
        students.query("SELECT COUNT(*) FROM students", analyst="mallory")
    assert students.log()[-1]["decision"] == "refused"


def test_table_rights(tmp_path: Path) -> None:
    document = yaml.safe_load((ROOT / "policies/students.yaml").read_text())
    document["tables"]["students"]["source"]["csv"] = str(ROOT / "examples/students/students.csv")
    document["tables"]["other"] = document["tables"]["students"]
    document["analysts"]["carol"] = {"tables": ["other"]}
    policy = tmp_path / "p.yaml"
    policy.write_text(yaml.safe_dump(document))
    with Guard.open(policy, state=tmp_path / "s") as guard:
        with pytest.raises(
            QueryRejected, match=r"unknown table 'students': the tables you may query are other$"
        ):
            guard.query("SELECT COUNT(*) FROM students", analyst="carol")
        assert guard.query("SELECT COUNT(*) FROM other", analyst="carol").rows == [[9]]


class TestLog:
    def test_every_request_logged_with_released_values_only(self, students: Guard) -> None:
        students.query("SELECT sex, major, SUM(income) FROM students GROUP BY sex, major", analyst="alice")
        with pytest.raises(QueryRejected):
            students.query("SELECT * FROM students", analyst="bob")
        with pytest.raises(QueryRefused):
            students.query(
                "SELECT SUM(income) FROM students WHERE major='EE' AND sex='Female'", analyst="bob"
            )
        answered, rejected, refused = students.log()
        assert answered["decision"] == "answered" and answered["analyst"] == "alice"
        assert answered["rows"] == [
            ["Female", "CS", None],
            ["Female", "EE", None],
            ["Male", "CS", 210000],
            ["Male", "EE", 190000],
        ]
        assert answered["canonical"] and answered["data_version"]
        assert (rejected["decision"], rejected["error"]) == ("rejected", "QueryRejected")
        assert (refused["decision"], refused["error"]) == ("refused", "QueryRefused")
        assert refused["rows"] is None
        assert students.log(analyst="bob", limit=1) == [refused]
        assert students.store.verify() == (3, None)
        released = [(r["rows"], r["reason"], r["notes"]) for r in students.log()]
        assert "50000" not in json.dumps(released)  # Baker's income never reaches the log

    def test_log_written_before_answer(self, students: Guard, monkeypatch: pytest.MonkeyPatch) -> None:
        """If the record cannot be written, the answer does not leave."""

        def broken(*_: object, **__: object) -> int:
            raise BackendError("cannot write the query log: disk full")

        monkeypatch.setattr(students.store, "wait", broken)  # every record is made durable there
        with pytest.raises(BackendError, match="cannot write the query log"):
            students.query("SELECT major, SUM(income) FROM students GROUP BY major", analyst="alice")

    def test_answer_is_logged_when_returned(self, students: Guard) -> None:
        result = students.query("SELECT COUNT(*) FROM students WHERE sex = 'Male'", analyst="alice")
        last = students.log(limit=1)[0]
        assert last["rows"] == result.rows and last["flags"] == result.flags

    def test_log_survives_reopen_and_detects_tampering(self, tmp_path: Path) -> None:
        policy = ROOT / "policies/students.yaml"
        with Guard.open(policy, state=tmp_path) as guard:
            guard.query("SELECT major, COUNT(*) FROM students GROUP BY major", analyst="alice")
        with Guard.open(policy, state=tmp_path) as guard:
            guard.query("SELECT sex, COUNT(*) FROM students GROUP BY sex", analyst="bob")
            assert [r["id"] for r in guard.log()] == [1, 2]
            assert guard.store.verify() == (2, None)
            guard.store._con.execute("UPDATE query_log SET analyst = 'eve' WHERE id = 1")
            assert guard.store.verify() == (2, 1)

    def test_state_in_use_by_another_process_is_a_clear_error(self, tmp_path: Path) -> None:
        import subprocess
        import sys

        script = (
            "import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); "
            "print('locked', flush=True); time.sleep(30)"
        )
        tmp_path.mkdir(exist_ok=True)
        holder = subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path / "guard.duckdb")], stdout=subprocess.PIPE, text=True
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
            with pytest.raises(BackendError, match="in use by another guard process"):
                Guard.open(ROOT / "policies/students.yaml", state=tmp_path)
        finally:
            holder.kill()
            holder.wait()


def test_error_codes_are_one_table() -> None:
    assert codes_for(QueryRejected("x")).exit_code == 3
    assert codes_for(QueryRefused).sqlstate == "42501"
    assert codes_for(AccessDenied).http_status == 401
    assert codes_for(BackendError).exit_code == 2
    assert QueryRefused("x").to_dict() == {"status": "refused", "error": "QueryRefused", "reason": "x"}
