"""Queries over protected answers through the PostgreSQL endpoint: the wrappers BI tools
send, a statement Describe that types the outer query's columns without asking
anything, parameters bound inside inner queries, and flag columns on computed outputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

TEXT, INT4, INT8, FLOAT8, NUMERIC = 25, 23, 20, 701, 1700
SUPERSET = (
    "SELECT major AS major, sum AS sum FROM (SELECT major, SUM(income) FROM students GROUP BY major) "
    "AS virtual_table LIMIT 1000"
)


def test_superset_and_metabase_wrappers(students: Any) -> None:
    with psycopg.connect(students.dsn(), autocommit=True) as conn:
        cur = conn.execute(SUPERSET)
        assert [(c.name, c.type_code) for c in cur.description] == [("major", TEXT), ("sum", NUMERIC)]
        assert cur.fetchall() == [("CS", 358000), ("EE", 240000)]
        cur = conn.execute(
            'SELECT "source"."major" AS "major", "source"."count" AS "count" FROM '
            '(SELECT major, COUNT(*) FROM students GROUP BY major) "source" LIMIT 1048575'
        )
        assert cur.fetchall() == [("CS", 5), ("EE", 4)]


def test_describe_types_the_outer_query_and_parameters_bind(
    serve: Callable[..., Any], wire: Callable[..., Any]
) -> None:
    students = serve("students")  # a fresh history: the answers above would complete small groups
    client = wire(students)
    before = students.log_size()
    client.parse(
        "SELECT sex, ROUND(AVG(income), -3) AS r, CAST(COUNT(*) AS INTEGER) AS n, "
        "100.0 * COUNT(*) / SUM(COUNT(*)) OVER () AS share FROM students WHERE major = $1 GROUP BY sex"
    )
    client.describe(b"S")
    reply = client.sync()
    assert reply.parameter_types() == [TEXT]
    assert [(name, oid) for name, oid, _ in reply.columns()] == [
        ("sex", TEXT),
        ("r", FLOAT8),
        ("n", INT4),
        ("share", FLOAT8),
    ]
    assert students.log_size() == before  # a Describe asks nothing
    client.bind((b"CS",))
    client.execute()
    rows = client.sync().rows()
    assert rows[0][:3] == [b"Female", None, None] and rows[1][:3] == [b"Male", b"70000", b"3"]
    assert rows[0][3] is None and rows[1][3] is None  # a share of a total with a withheld count
    logged = students.guard.log()[-2:]
    assert [row["decision"] for row in logged] == ["answered", "post-processed"]
    assert "major = 'CS'" in logged[0]["sql"] and "major = 'CS'" in logged[1]["sql"]


def test_flag_columns_follow_computed_outputs(serve: Callable[..., Any]) -> None:
    students = serve("students")
    sql = "SELECT sex, major, SUM(income) / COUNT(*) AS mean FROM students GROUP BY sex, major ORDER BY 1, 2"
    with psycopg.connect(students.dsn(options="'-c statguard.flags=on'"), autocommit=True) as conn:
        cur = conn.execute(sql, prepare=True)
        assert [(c.name, c.type_code) for c in cur.description] == [
            ("sex", TEXT),
            ("major", TEXT),
            ("mean", FLOAT8),
            ("mean_flag", TEXT),
        ]
        rows = cur.fetchall()
    assert [(r[0], r[1], r[3]) for r in rows] == [
        ("Female", "CS", "suppressed"),
        ("Female", "EE", "suppressed"),
        ("Male", "CS", "released"),
        ("Male", "EE", "released"),
    ]
    assert rows[0][2] is None and rows[2][2] == 70000.0
