"""Bad input is logged too: a body that is no query, from an authenticated analyst, is a
rejected row in the query log (found by the fuzz harness: text that is not UTF-8)."""

from __future__ import annotations

from tests.server.http.conftest import ALICE, Api


def test_a_body_that_is_not_utf8_is_rejected_and_logged(students_api: Api) -> None:
    body = b'{"sql": "SELECT COUNT(*) FROM students WHERE sex = \'E\xed\xa0\x80\'"}'
    headers = {**ALICE, "Content-Type": "application/json"}
    response = students_api.client.post("/query", content=body, headers=headers)
    assert response.status_code == 422 and response.json()["error"] == "InvalidRequest"
    record = students_api.guard.log()[-1]
    assert record["decision"] == "rejected" and record["analyst"] == "alice"
    assert record["sql"].startswith("SELECT COUNT(*) FROM students")
    assert "\\ud800" in record["sql"] or "\\xed\\xa0\\x80" in record["sql"]  # escaped, not dropped


def test_an_unauthenticated_bad_body_is_not_logged_as_anyone(students_api: Api) -> None:
    before = len(students_api.guard.log())
    response = students_api.client.post(
        "/query", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert response.status_code in (401, 422)
    assert [r["decision"] for r in students_api.guard.log()[before:]] in ([], ["login-failed"])


def test_a_lone_surrogate_escaped_in_json_is_rejected_and_logged_as_its_sql(students_api: Api) -> None:
    body = b'{"sql": "SELECT COUNT(*) FROM students WHERE sex = \'E\\ud800\'"}'
    headers = {**ALICE, "Content-Type": "application/json"}
    response = students_api.client.post("/query", content=body, headers=headers)
    assert response.status_code in (400, 422)
    record = students_api.guard.log()[-1]
    assert record["decision"] == "rejected" and record["sql"].startswith("SELECT COUNT(*)")
