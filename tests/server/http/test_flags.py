"""POST /query with flags: a text column <label>_flag after each aggregate column (body
field or ?flags=true, JSON and Arrow); lists of a dimension's values."""

from __future__ import annotations

import pyarrow as pa

from tests.server.http.conftest import ALICE, Api

GROUPED = "SELECT sex, major, COUNT(*), AVG(income) FROM students GROUP BY sex, major"
ARROW = {"Accept": "application/vnd.apache.arrow.stream"}


def test_flag_columns_equal_the_cell_flags(students_api: Api) -> None:
    plain = students_api.client.post("/query", json={"sql": GROUPED}, headers=ALICE).json()
    flagged = students_api.client.post("/query", json={"sql": GROUPED, "flags": True}, headers=ALICE).json()
    assert plain["columns"] == ["sex", "major", "count", "avg"]
    assert flagged["columns"] == ["sex", "major", "count", "count_flag", "avg", "avg_flag"]
    for row, flags, out in zip(plain["rows"], plain["flags"], flagged["rows"], strict=True):
        assert out == [row[0], row[1], row[2], flags[2], row[3], flags[3]]
        for value, flag in ((out[2], out[3]), (out[4], out[5])):
            assert flag in ("released", "suppressed")
            assert (value is None) == (flag == "suppressed")
    assert [r[3] for r in flagged["rows"]] == ["suppressed", "suppressed", "released", "released"]
    # the flag columns' own cells are released values
    assert all(f[3] == f[5] == "released" for f in flagged["flags"])


def test_flags_as_a_query_parameter_and_in_arrow(students_api: Api) -> None:
    by_param = students_api.client.post("/query?flags=true", json={"sql": GROUPED}, headers=ALICE)
    assert by_param.status_code == 200
    assert by_param.json()["columns"][3] == "count_flag"
    arrow = students_api.client.post("/query?flags=true", json={"sql": GROUPED}, headers={**ALICE, **ARROW})
    table = pa.ipc.open_stream(arrow.content).read_all()
    assert table.column_names == ["sex", "major", "count", "count_flag", "avg", "avg_flag"]
    assert table.schema.field("count_flag").type == pa.string()
    assert table.column("count_flag").to_pylist() == ["suppressed", "suppressed", "released", "released"]


def test_flags_must_be_a_boolean(students_api: Api) -> None:
    response = students_api.client.post("/query", json={"sql": GROUPED, "flags": "perhaps"}, headers=ALICE)
    assert response.status_code == 422
    assert "flags" in response.json()["reason"]


def test_listing_values_withholds_rare_ones_and_never_sends_counts(students_api: Api) -> None:
    response = students_api.client.post(
        "/query", json={"sql": "SELECT DISTINCT class FROM students", "flags": True}, headers=ALICE
    )
    answer = response.json()
    assert answer["columns"] == ["class"]
    assert answer["rows"] == [[1978]]
    assert answer["flags"] == [["released"]]
    assert answer["notes"] == [
        "3 of 4 values not listed: a value is listed only where the number of its rows could be "
        "released (at least k=3 privacy units, and not withheld to protect a smaller group)"
    ]
    logged = students_api.client.get("/log", headers=ALICE).json()[-1]
    assert logged["sql"] == "SELECT DISTINCT class FROM students"
    assert logged["decision"] == "answered"
    assert logged["columns"] == ["class"] and logged["rows"] == [[1978]]
