"""Column types on the wire follow the engine's: a table with dates, booleans, integers,
decimals and doubles, described (statement Describe) and answered."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import duckdb
import psycopg
import pytest

from guard.policy.credentials import make_verifier

BOOL, INT8, INT4, TEXT, FLOAT8, DATE, NUMERIC = 16, 20, 23, 25, 701, 1082, 1700


@pytest.fixture(scope="module")
def typed(serve: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("typed")
    with duckdb.connect(str(folder / "data.duckdb")) as con:
        con.execute(
            """CREATE TABLE visits AS SELECT i AS id,
                   DATE '2024-01-01' + CAST(i % 2 AS INTEGER) AS day,
                   i % 3 = 0 AS urgent,
                   CAST(i % 2 AS INTEGER) AS ward,
                   CAST(i * 1.25 AS DECIMAL(10, 2)) AS cost,
                   CAST(i * 0.5 AS DOUBLE) AS hours
               FROM range(1, 61) t(i)"""
        )
    policy = folder / "typed.yaml"
    policy.write_text(
        f"""name: typed
tables:
  visits:
    source: {{duckdb: {folder / "data.duckdb"}, table: visits}}
    privacy_unit: id
    columns:
      id: {{role: identifier}}
      day: {{role: dimension}}
      urgent: {{role: dimension}}
      ward: {{role: dimension}}
      cost: {{role: measure, bounds: [0, 100]}}
      hours: {{role: measure, bounds: [0, 40]}}
analysts:
  alice: {{password: "{make_verifier("alice-demo", iterations=64)}"}}
"""
    )
    return serve(policy)


SQL = (
    "SELECT day, urgent, ward, SUM(cost), AVG(cost), SUM(hours), AVG(hours), COUNT(*) "
    "FROM visits WHERE day >= $1 GROUP BY day, urgent, ward ORDER BY day, urgent, ward"
)


def test_statement_describe_types(typed: Any, wire: Callable[..., Any]) -> None:
    client = wire(typed)
    client.parse(SQL)
    client.describe(b"S")
    reply = client.sync()
    assert reply.parameter_types() == [DATE]
    assert [oid for _, oid, _ in reply.columns()] == [DATE, BOOL, INT4, NUMERIC, FLOAT8, FLOAT8, FLOAT8, INT8]


@pytest.mark.parametrize("binary", [False, True])
def test_values_arrive_typed(typed: Any, binary: bool) -> None:
    with psycopg.connect(typed.dsn(), autocommit=True) as conn:
        cur = conn.cursor(binary=binary)
        rows = cur.execute(SQL.replace("$1", "%s"), (dt.date(2024, 1, 1),)).fetchall()
    assert [row[:3] for row in rows] == [
        (dt.date(2024, 1, 1), False, 0),
        (dt.date(2024, 1, 1), True, 0),
        (dt.date(2024, 1, 2), False, 1),
        (dt.date(2024, 1, 2), True, 1),
    ]
    first = rows[0]
    assert isinstance(first[3], Decimal) and isinstance(first[4], float) and isinstance(first[7], int)
    assert sum(row[7] for row in rows) == 60
    assert sum(row[3] for row in rows) == Decimal("2287.50")  # 1.25 * (1 + ... + 60)
