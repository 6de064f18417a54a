"""What a query over protected answers asks, logs and refuses: each inner query is
protected and logged as if asked alone (the offline audit replays it), the outer query
is logged with the inner log ids, a refused inner query refuses the whole request with
its own message, and the outer query reads nothing but the answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from guard import Guard
from guard.audit.cellsets import GuardCells
from guard.audit.logsource import entries_from_store
from guard.audit.offline import audit_log
from guard.errors import QueryRefused, QueryRejected

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "policies"


@pytest.fixture
def students(tmp_path: Path) -> Iterator[Guard]:
    with Guard.open(POLICIES / "students.yaml", state=tmp_path / "state") as guard:
        yield guard


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guard]:
    with Guard.open(POLICIES / "students.yaml", state=tmp_path_factory.mktemp("shared")) as guard:
        yield guard


def _log(guard: Guard) -> list[dict[str, object]]:
    return sorted(guard.log(), key=lambda row: int(str(row["id"])))  # oldest first


def test_the_inner_query_is_logged_as_if_asked_alone(students: Guard, tmp_path: Path) -> None:
    sql = "SELECT sex, major, ROUND(AVG(income), -3) AS r FROM students GROUP BY 1, 2"
    result = students.query(sql, "alice")
    inner, outer = _log(students)
    with Guard.open(POLICIES / "students.yaml", state=tmp_path / "alone") as alone:
        alone.query("SELECT sex, major, AVG(income) FROM students GROUP BY sex, major", "alice")
        [asked] = _log(alone)
    for key in ("decision", "canonical", "rows", "flags", "notes", "data_version"):
        assert inner[key] == asked[key], key
    assert outer["decision"] == "post-processed"
    assert json.loads(str(outer["canonical"])) == {"computed_from": [inner["id"]]}
    assert outer["sql"].startswith("SELECT sex, major, ROUND(")  # type: ignore[union-attr]
    assert outer["rows"] == [list(r) for r in result.rows]
    assert outer["flags"] == [list(f) for f in result.flags]
    assert outer["notes"] == inner["notes"] == list(result.notes)


def test_the_offline_audit_replays_the_inner_queries(students: Guard) -> None:
    students.query(
        "SELECT m.major, m.n, c.n AS male FROM (SELECT major, COUNT(*) AS n FROM students GROUP BY major) m "
        "JOIN (SELECT major, COUNT(*) AS n FROM students WHERE sex = 'Male' GROUP BY major) c "
        "ON m.major = c.major",
        "alice",
    )
    entries = entries_from_store(students.log())
    assert [e.sql.split(" FROM ")[1] for e in entries] == [
        "students GROUP BY major",
        "students WHERE sex = 'Male' GROUP BY major",
    ]
    report = audit_log(entries, GuardCells(students.policy, students.backend), k=3)
    assert not report.not_replayable
    assert len(report.disclosures) == 0


def test_a_refused_inner_query_refuses_the_request_with_its_message(students: Guard) -> None:
    sql = "SELECT n * 2 FROM (SELECT COUNT(*) AS n FROM students WHERE major = 'EE' AND sex = 'Female') t"
    with pytest.raises(QueryRefused, match="query-set-size control") as refused:
        students.query(sql, "alice")
    inner, outer = _log(students)
    assert inner["decision"] == outer["decision"] == "refused"
    assert inner["reason"] == outer["reason"] == refused.value.message
    assert outer["sql"] == sql


def test_a_rejected_inner_query_is_not_asked(students: Guard) -> None:
    """An inner query the front stages reject is rejected before any is asked: one log row."""
    sql = (
        "SELECT a.n FROM (SELECT COUNT(*) AS n FROM students) a, "
        "(SELECT SUM(CASE WHEN income > 60000 THEN 1 END) AS x FROM students) b"
    )
    with pytest.raises(QueryRejected, match="aggregate arguments must be one bare column"):
        students.query(sql, "alice")
    [row] = _log(students)
    assert row["decision"] == "rejected"


def test_an_outer_query_that_cannot_run_asks_nothing(students: Guard) -> None:
    with pytest.raises(QueryRejected, match="cannot run"):
        students.query("SELECT n + DATE '2020-01-01' FROM (SELECT COUNT(*) AS n FROM students) t", "alice")
    [row] = _log(students)
    assert row["decision"] == "rejected"


#: an inner query, as the outer queries below read it
C = "(SELECT COUNT(*) AS n FROM students)"


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (f"SELECT n, getenv('HOME') FROM {C} s", "function GETENV"),
        (f"WITH a AS {C} SELECT n, current_setting('threads') FROM a", "CURRENT_SETTING"),
        (f"SELECT * FROM {C} s, read_csv('/etc/passwd')", "JOIN is not allowed"),
        (f"SELECT * FROM {C} s JOIN students t ON true", "JOIN is not allowed"),
        (f"SELECT n FROM {C} s WHERE n IN (SELECT income FROM students)", "IN (SELECT"),
        (f"SELECT (SELECT SUM(n) FROM {C} a) FROM students", "subqueries are not"),
        ("SELECT SUM(x) FROM (SELECT income AS x FROM students) s", "cannot be output row by row"),
        ("SELECT COUNT(*) FROM (SELECT major FROM students) s", "must appear in GROUP BY"),
        ("SELECT SUM(CASE WHEN income > 60000 THEN 1 END) * 1 FROM students", "one bare column"),
        ("SELECT COUNT(*) * 2 FROM students WHERE income > 5", "cannot be used in WHERE"),
        ("SELECT major, COUNT(*) * 2 FROM students GROUP BY major ORDER BY name", "identifies respondents"),
        ("SELECT COUNT(*) * 2 FROM pg_catalog.pg_class", "system catalogs are not available"),
        (f"SELECT * FROM {C} s, _q0", "JOIN is not allowed"),
        (f'SELECT "n#level" FROM {C} s', "reserved"),
        (f"WITH _q0 AS {C} SELECT * FROM _q0", "reserved"),
        (f"SELECT n FROM {C} s ORDER BY random()", "function RANDOM"),
        (f"SELECT * FROM {C} s INTERSECT SELECT 1", "INTERSECT is not allowed"),
        (f"SELECT x FROM {C} s", "reads only the columns of its inner"),
        (f"SELECT n FROM {C} s LIMIT (SELECT 1)", "use a whole number"),
        ("SELECT MAX(income) * 2 FROM students", "MIN and MAX are not allowed"),
        ("SELECT COUNT(*) OVER () FROM students", "window functions (OVER ...) are not allowed"),
    ],
)
def test_what_reads_data_stays_refused(shared: Guard, sql: str, message: str) -> None:
    before = len(shared.log())
    with pytest.raises(QueryRejected) as rejected:
        shared.query(sql, "alice")
    assert message in rejected.value.message
    [row] = _log(shared)[before:]  # nothing was asked
    assert row["decision"] == "rejected"


def test_noised_answers_are_post_processed_and_charged_once(tmp_path: Path) -> None:
    with Guard.open(POLICIES / "hospital-dp.yaml", state=tmp_path / "dp") as guard:
        result = guard.query("SELECT town, ROUND(AVG(income), -2) AS r FROM hospital GROUP BY town", "alice")
        budget = guard.budget("alice")
        log = _log(guard)
    assert {row[1] for row in result.flags} <= {"noised", "suppressed"} and result.flags[0][0] == "released"
    assert all(v is None or float(v) % 100 == 0 for _, v in result.rows)
    assert [row["decision"] for row in log] == ["answered", "post-processed"]
    assert len(budget["charges"]) == 1


def test_a_computation_that_grows_too_much_is_refused(shared: Guard, monkeypatch: pytest.MonkeyPatch) -> None:
    import guard.post.run as run

    cells = "(SELECT sex, major, class, COUNT(*) AS n FROM students GROUP BY ALL)"
    monkeypatch.setattr(run, "MAX_ROWS", 100)
    with pytest.raises(QueryRejected, match="returns more than 100 rows"):
        shared.query(f"SELECT a.n FROM {cells} a, {cells} b, {cells} c", "alice")
    monkeypatch.setattr(run, "TIME_LIMIT", 0.2)
    joined = ", ".join(f"{cells} t{i}" for i in range(8))
    window = "SUM(t0.n * t1.n - t2.n) OVER (ORDER BY t3.n + t4.n - t5.n)"
    with pytest.raises(QueryRejected, match=r"ran longer than 0\.2 s"):
        shared.query(f"SELECT {window} FROM {joined}", "alice")


def test_plain_queries_never_reach_the_outer_layer(shared: Guard, monkeypatch: pytest.MonkeyPatch) -> None:
    """An accepted plain query takes the plain path only; a rejected one that computes
    on nothing keeps its own message."""
    import guard.core

    def unexpected(*_: object, **__: object) -> None:
        raise AssertionError("plan_outer called")

    monkeypatch.setattr(guard.core, "plan_outer", unexpected)
    shared.query("SELECT major, SUM(income) FROM students GROUP BY major", "alice")
    monkeypatch.undo()
    with pytest.raises(QueryRejected, match="SELECT \\* is not allowed"):
        shared.query("SELECT * FROM students", "alice")


def test_the_read_probe_of_metabase_is_answered_empty(shared: Guard) -> None:
    result = shared.query('SELECT TRUE AS "_" FROM "public"."students" WHERE 1 <> 1 LIMIT 0', "alice")
    assert list(result.columns) == ["_"] and list(result.rows) == []
    with pytest.raises(QueryRejected, match="unknown table"):
        shared.query('SELECT TRUE AS "_" FROM "public"."secret" WHERE 1 <> 1 LIMIT 0', "alice")


def test_outputs_keep_the_names_as_written(shared: Guard) -> None:
    """Names are compared without case (as DuckDB does) but labelled as written: Superset
    reads its metric back by its alias."""
    result = shared.query(
        'SELECT "Major", "AVG(income)" FROM (SELECT major AS "Major", AVG(income) AS "AVG(income)" '
        "FROM students GROUP BY major) AS virtual_table",
        "alice",
    )
    assert list(result.columns) == ["Major", "AVG(income)"]
    star = shared.query('SELECT * FROM (SELECT COUNT(*) AS "Total" FROM students) t', "alice")
    assert list(star.columns) == ["Total"]
