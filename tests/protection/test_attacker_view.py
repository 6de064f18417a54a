"""Relations an attacker can write down although no released cell states them: two
margins of one table share its total, and every released cell is a sum of the cells
of the common refinement."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from guard import Guard
from guard.errors import QueryRefused

ROWS = [  # person, a, b, x: a1 has one person
    (1, "a1", "b1", 50),
    (2, "a2", "b1", 10), (3, "a2", "b1", 12), (4, "a2", "b2", 14), (5, "a2", "b2", 16),
    (6, "a3", "b1", 20), (7, "a3", "b1", 22), (8, "a3", "b2", 24), (9, "a3", "b2", 26),
]  # fmt: skip


@pytest.fixture
def guard(tmp_path: Path) -> Guard:
    data = tmp_path / "t.csv"
    data.write_text("person,a,b,x\n" + "".join(f"{p},{a},{b},{x}\n" for p, a, b, x in ROWS))
    policy = {
        "name": "toy",
        "protection": {"min_query_set_size": 3},
        "tables": {
            "t": {
                "source": {"csv": str(data)},
                "privacy_unit": "person",
                "columns": {
                    "person": {"role": "identifier"},
                    "a": {"role": "dimension"},
                    "b": {"role": "dimension"},
                    "x": {"role": "measure", "bounds": [0, 100]},
                },
            }
        },
        "analysts": {"alice": {}},
    }
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(policy))
    with Guard.open(path, state=tmp_path / "state") as opened:
        yield opened  # type: ignore[misc]


def _released(result: object) -> dict[tuple[object, object], object]:
    return {(row[0], row[1]): row[2] for row in result.rows}  # type: ignore[attr-defined]


def test_two_margins_in_one_answer_share_their_total(guard: Guard) -> None:
    cells = _released(guard.query("SELECT a, b, SUM(x) FROM t GROUP BY GROUPING SETS ((a), (b))", "alice"))
    assert cells[("a1", None)] is None
    # a1 = (b1 + b2) - a2 - a3 unless one more cell is withheld
    others = [cells[("a2", None)], cells[("a3", None)], cells[(None, "b1")], cells[(None, "b2")]]
    assert None in others


def test_margins_released_one_after_the_other_share_their_total(guard: Guard) -> None:
    first = guard.query("SELECT a, SUM(x) FROM t GROUP BY a", "alice")
    assert first.rows[0][1] is None  # a1 withheld
    second = guard.query("SELECT b, SUM(x) FROM t GROUP BY b", "alice")
    released_b = [row[1] for row in second.rows]
    a_released = [row[1] for row in first.rows[1:]]
    # both margins complete would give a1 away: the second answer must withhold
    assert None in released_b or None in a_released


def test_total_after_a_margin_with_a_withheld_cell_is_refused(guard: Guard) -> None:
    guard.query("SELECT a, SUM(x) FROM t GROUP BY a", "alice")
    with pytest.raises(QueryRefused, match="secondary cell suppression"):
        guard.query("SELECT SUM(x) FROM t", "alice")
