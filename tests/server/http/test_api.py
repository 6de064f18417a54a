"""The HTTP API against a real uvicorn server: answers, refusals, authentication, budgets,
Arrow, the log, the schema."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pytest

from guard import Guard
from guard.errors import NoBudgets, PolicyError, codes_for
from tests.server.http.conftest import ALICE, BOB, POLICIES, Api

GROUPED = "SELECT sex, major, COUNT(*), AVG(income) FROM students GROUP BY sex, major"
BY_MAJOR = "SELECT major, SUM(income) FROM students GROUP BY major"
SMALL = "SELECT SUM(income) FROM students WHERE sex = 'Female' AND major = 'EE'"
ENFIELD = "SELECT AVG(income) FROM hospital WHERE town = 'Enfield'"
TOTAL = "SELECT SUM(income) FROM hospital"
ARROW = {"Accept": "application/vnd.apache.arrow.stream"}


def test_answer_body_is_exactly_the_library_json(students_api: Api, tmp_path: Path) -> None:
    with Guard.open(POLICIES / "students.yaml", state=tmp_path / "direct") as direct:
        expected = [direct.query(sql, analyst="alice").to_json() for sql in (BY_MAJOR, GROUPED)]
    responses = [
        students_api.client.post("/query", json={"sql": sql}, headers=ALICE) for sql in (BY_MAJOR, GROUPED)
    ]
    assert [r.status_code for r in responses] == [200, 200]
    assert [r.text for r in responses] == expected
    assert responses[0].headers["content-type"] == "application/json"
    assert responses[0].headers["cache-control"] == "no-store"


def test_withheld_cells_are_null_and_flagged(shared_api: Api) -> None:
    answer = shared_api.client.post("/query", json={"sql": GROUPED}, headers=ALICE).json()
    cells = [
        (v, f)
        for row, flags in zip(answer["rows"], answer["flags"], strict=True)
        for v, f in zip(row, flags, strict=True)
    ]
    assert any(f == "suppressed" for _, f in cells)
    assert all(v is None for v, f in cells if f == "suppressed")
    assert all(v is not None for v, f in cells if f == "released")


def test_parameters_are_bound(students_api: Api) -> None:
    body = {"sql": "SELECT COUNT(*) FROM students WHERE major = $1", "parameters": ["EE"]}
    answer = students_api.client.post("/query", json=body, headers=ALICE).json()
    assert answer["rows"] == [[4]]
    assert students_api.guard.log()[-1]["sql"] == "SELECT COUNT(*) FROM students WHERE major = 'EE'"


def test_refused_query_is_403_with_the_guards_reason(students_api: Api) -> None:
    response = students_api.client.post("/query", json={"sql": SMALL}, headers=ALICE)
    assert response.status_code == 403
    assert response.json() == {
        "status": "refused",
        "error": "QueryRefused",
        "reason": "refused by the query-set-size control: the query set covers fewer than k=3 respondents; "
        "widen the WHERE conditions or group by fewer dimensions",
    }
    assert students_api.guard.log()[-1]["decision"] == "refused"


def test_rejected_query_is_400_and_says_what_to_change(shared_api: Api) -> None:
    response = shared_api.client.post("/query", json={"sql": "SELECT name FROM students"}, headers=ALICE)
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "QueryRejected" and "identifies respondents" in body["reason"]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-password"},
        {"Authorization": "Bearer"},
        {"Authorization": "Basic YWxpY2U6YWxpY2UtZGVtbw=="},  # alice:alice-demo, but not a bearer token
        {"Authorization": "Bearer alice"},  # a name is not a token
    ],
)
def test_missing_or_wrong_token_is_401_and_nothing_runs(students_api: Api, headers: dict[str, str]) -> None:
    response = students_api.client.post("/query", json={"sql": BY_MAJOR}, headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert (
        response.json()["error"] == "AccessDenied" and "Bearer <your password>" in response.json()["reason"]
    )
    assert students_api.client.get("/budget", headers=headers).status_code == 401
    assert students_api.client.get("/log", headers=headers).status_code == 401
    assert students_api.guard.log() == []


def test_budget_shows_only_the_callers_account_and_charges(dp_api: Api) -> None:
    client = dp_api.client
    for sql in (ENFIELD, "SELECT COUNT(*) FROM hospital"):
        assert client.post("/query", json={"sql": sql}, headers=ALICE).status_code == 200
    assert client.post("/query", json={"sql": TOTAL}, headers=BOB).status_code == 200
    alice = client.get("/budget", headers=ALICE).json()
    bob = client.get("/budget", headers=BOB).json()
    spent = {a["account"]: a["spent"]["exact"] for a in alice["accounts"]}
    assert spent == {"global": "3", "analyst:alice": "2"}  # the shared global account, not bob's
    assert [c["analyst"] for c in alice["charges"]] == ["alice", "alice"]
    assert {a["account"] for a in bob["accounts"]} == {"global", "analyst:bob"}
    assert [(c["analyst"], c["epsilon"]["exact"]) for c in bob["charges"]] == [("bob", "1")]
    assert "alice" not in json.dumps(bob)


def test_exhausted_budget_is_429(dp_api: Api) -> None:
    for i in range(10):
        sql = f"SELECT COUNT(*) FROM hospital WHERE town IN ('Enfield', 'T{i}')"
        assert dp_api.client.post("/query", json={"sql": sql}, headers=BOB).status_code == 200
    response = dp_api.client.post("/query", json={"sql": ENFIELD}, headers=BOB)
    assert response.status_code == 429
    assert response.json()["error"] == "BudgetExhausted" and "ε = 0 of 10 left" in response.json()["reason"]


def test_budget_without_noise_mode_has_the_error_tables_status_and_the_reason(students_api: Api) -> None:
    response = students_api.client.get("/budget", headers=ALICE)
    assert response.status_code == codes_for(NoBudgets).http_status == 404  # one table, no endpoint's own
    assert response.json()["error"] == "NoBudgets" and "no privacy budgets" in response.json()["reason"]
    assert isinstance(NoBudgets("x"), PolicyError)


def test_arrow_stream_is_readable_with_flags_and_notes(shared_api: Api) -> None:
    response = shared_api.client.post("/query", json={"sql": GROUPED}, headers={**ALICE, **ARROW})
    assert response.status_code == 200 and response.headers["content-type"] == ARROW["Accept"]
    table = pa.ipc.open_stream(io.BytesIO(response.content)).read_all()
    record = shared_api.guard.log()[-1]
    assert table.column_names == record["columns"]
    assert [list(row.values()) for row in table.to_pylist()] == record["rows"]
    metadata = table.schema.metadata
    assert json.loads(metadata[b"statguard.flags"]) == record["flags"]
    assert json.loads(metadata[b"statguard.notes"]) == record["notes"]
    flags = record["flags"]
    assert table.column("count").null_count == sum(row[2] == "suppressed" for row in flags) > 0


def test_arrow_quality_zero_and_wildcards_get_json(shared_api: Api) -> None:
    for accept in ("application/vnd.apache.arrow.stream;q=0", "*/*", "application/json"):
        response = shared_api.client.post(
            "/query", json={"sql": BY_MAJOR}, headers={**ALICE, "Accept": accept}
        )
        assert response.headers["content-type"] == "application/json", accept


def test_log_shows_only_the_callers_own_requests(students_api: Api) -> None:
    client = students_api.client
    client.post("/query", json={"sql": BY_MAJOR}, headers=ALICE)
    client.post("/query", json={"sql": SMALL}, headers=BOB)
    alice = client.get("/log", headers=ALICE).json()
    bob = client.get("/log", headers=BOB).json()
    assert [(e["sql"], e["decision"]) for e in alice] == [(BY_MAJOR, "answered")]
    assert [(e["sql"], e["decision"]) for e in bob] == [(SMALL, "refused")]
    assert "record_hash" not in alice[0] and "data_version" not in alice[0]
    assert client.get("/log", params={"limit": 0}, headers=ALICE).status_code == 422


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"sql": "SELECT', "not valid JSON"),
        (b'{"query": "SELECT COUNT(*) FROM students"}', "sql: Field required"),
        (
            b'{"sql": "SELECT COUNT(*) FROM students", "parameters": [{"a": 1}]}',
            "parameters.0: Value error, a parameter",
        ),
        (b'{"sql": ""}', "sql: String should have at least 1 character"),
        (b"[]", "Input should be a valid dictionary"),
    ],
)
def test_malformed_request_is_422_with_a_clear_message(shared_api: Api, body: bytes, expected: str) -> None:
    headers = {**ALICE, "Content-Type": "application/json"}
    response = shared_api.client.post("/query", content=body, headers=headers)
    assert response.status_code == 422
    assert response.json()["error"] == "InvalidRequest" and expected in response.json()["reason"]
    assert "Traceback" not in response.text


def test_unexpected_exception_is_a_generic_500(shared_api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("Baker earns 50000")  # a bug whose message holds a value

    monkeypatch.setattr(shared_api.guard, "query", broken)
    response = shared_api.client.post("/query", json={"sql": BY_MAJOR}, headers=ALICE)
    assert response.status_code == 500
    assert response.json()["reason"].startswith("internal error (RuntimeError)")
    assert "50000" not in response.text
    assert shared_api.client.get("/health").status_code == 200  # on the same kept-alive connection


def test_health_needs_no_token_and_tells_no_secret(shared_api: Api) -> None:
    response = shared_api.client.get("/health")
    assert response.status_code == 200 and response.json() == {"status": "ok", "policy": "students"}


def test_unknown_route_is_404_in_the_error_shape(shared_api: Api) -> None:
    response = shared_api.client.get("/tables")
    assert response.status_code == 404 and "POST /query" in response.json()["reason"]


def test_openapi_documents_the_endpoints_and_bearer_auth(shared_api: Api) -> None:
    schema = shared_api.client.get("/openapi.json").json()
    assert {"/query", "/budget", "/log", "/health"} <= set(schema["paths"])
    query = schema["paths"]["/query"]["post"]
    assert query["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/QueryRequest")
    assert {"200", "400", "401", "403", "422", "429"} <= set(query["responses"])
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
