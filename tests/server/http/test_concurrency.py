"""16 concurrent HTTP clients: every request answered or refused as it should be, logged
exactly once, the log's hash chain intact, no budget overspent (a bounded version of
benchmarks/bench_endpoint.py)."""

from __future__ import annotations

import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

import httpx
import pytest

from tests.server.http.conftest import ALICE, BOB, Api

CLIENTS = 16
PER_CLIENT = 25

#: template -> the statuses it may get; {i} makes a query new (and charged) each time
STUDENTS = {
    "SELECT major, SUM(income) FROM students GROUP BY major": {200},
    "SELECT sex, major, COUNT(*), AVG(income) FROM students GROUP BY sex, major": {200},
    "SELECT SUM(income) FROM students WHERE sex = 'Female' AND major = 'EE'": {403},
    "SELECT name FROM students": {400},
}
HOSPITAL = {
    "SELECT town, COUNT(*) FROM hospital GROUP BY town": {200, 429},
    "SELECT COUNT(*) FROM hospital WHERE town IN ('Enfield', 'T{i}')": {200, 429},
    "SELECT AVG(income) FROM hospital WHERE town = 'Enfield'": {200, 429},
    "SELECT patient_id FROM hospital": {400},
}
DECISIONS = {200: "answered", 400: "rejected", 403: "refused", 429: "refused"}


def run_clients(api: Api, templates: dict[str, set[int]]) -> dict[int, tuple[str, int]]:
    """Each client sends PER_CLIENT requests on its own connection; returns, per request
    number, the template and the status."""
    texts = list(templates)

    def client(number: int) -> dict[int, tuple[str, int]]:
        headers = ALICE if number % 2 else BOB
        got = {}
        with httpx.Client(base_url=api.url, timeout=60) as http:
            for j in range(PER_CLIENT):
                request = number * PER_CLIENT + j
                template = texts[request % len(texts)]
                sql = f"{template.format(i=request)} /* request {request} */"
                got[request] = (template, http.post("/query", json={"sql": sql}, headers=headers).status_code)
        return got

    with ThreadPoolExecutor(CLIENTS) as pool:
        results: dict[int, tuple[str, int]] = {}
        for part in pool.map(client, range(CLIENTS)):
            results.update(part)
    return results


def request_number(sql: str) -> int:
    tag = re.search(r"/\* request (\d+) \*/", sql)
    assert tag is not None, sql
    return int(tag.group(1))


@pytest.mark.parametrize("policy", ["students", "hospital-dp"])
def test_concurrent_clients_are_each_logged_once(policy: str, request: pytest.FixtureRequest) -> None:
    api: Api = request.getfixturevalue("students_api" if policy == "students" else "dp_api")
    templates = STUDENTS if policy == "students" else HOSPITAL
    results = run_clients(api, templates)

    assert len(results) == CLIENTS * PER_CLIENT
    unexpected = {n: (t, s) for n, (t, s) in results.items() if s not in templates[t]}
    assert not unexpected
    log = api.guard.log()
    assert len(log) == CLIENTS * PER_CLIENT
    logged = Counter(request_number(r["sql"]) for r in log)
    assert set(logged.values()) == {1} and set(logged) == set(results)
    decisions = {request_number(r["sql"]): r["decision"] for r in log}
    assert all(decisions[n] == DECISIONS[status] for n, (_, status) in results.items())
    checked, broken = api.guard.store.verify()
    assert (checked, broken) == (len(log), None)
    if policy == "hospital-dp":
        accounts = api.guard.budget()["accounts"]
        assert all(Fraction(a["spent"]["exact"]) <= Fraction(a["limit"]["exact"]) for a in accounts)
        # each analyst's budget (10) ran out: the concurrent charges stopped exactly at it
        spent = {a["account"]: a["spent"]["exact"] for a in accounts}
        assert (spent["analyst:alice"], spent["analyst:bob"]) == ("10", "10")
        assert Counter(s for _, s in results.values())[429] > 0
