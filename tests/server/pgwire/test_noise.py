"""Noise mode over the wire: noisy values are float8, and every note (noise scales,
budget left) arrives as a notice."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest


@pytest.fixture(scope="module")
def hospital(serve: Callable[..., Any]) -> Any:
    return serve("hospital-dp")


def test_noisy_answers_types_and_notes(hospital: Any) -> None:
    notices: list[str] = []
    with psycopg.connect(hospital.dsn(), autocommit=True) as conn:
        conn.add_notice_handler(lambda diagnostic: notices.append(diagnostic.message_primary or ""))
        # no GROUP BY: the one row is always shown (grouped rows need a noisy count over a threshold)
        cur = conn.execute("SELECT SUM(income), AVG(income), COUNT(*) FROM hospital")
        rows = cur.fetchall()
        types = [c.type_code for c in cur.description]
    assert types == [701, 701, 20]  # a noisy sum is a real number; a noisy count a whole one
    assert len(rows) == 1 and isinstance(rows[0][0], float) and isinstance(rows[0][2], int)
    assert notices == hospital.guard.log()[-1]["notes"]
    assert any("left for analyst 'alice'" in note for note in notices)


def test_statement_describe_knows_the_noise_types(hospital: Any, wire: Callable[..., Any]) -> None:
    client = wire(hospital)
    before = hospital.log_size()
    client.parse("SELECT SUM(income), COUNT(*) FROM hospital WHERE town = $1")
    client.describe(b"S")
    reply = client.sync()
    assert [oid for _, oid, _ in reply.columns()] == [701, 20]
    assert hospital.log_size() == before
