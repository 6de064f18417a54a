"""Flag columns: after each aggregate column, its cells' flags as values; and whether an
answer released nothing at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from guard import Guard
from guard.result import ProtectedResult

ROOT = Path(__file__).resolve().parents[1]


def test_flag_columns_are_the_cell_flags(students: Guard) -> None:
    sql = "SELECT major, sex, COUNT(*), AVG(income), GROUPING(sex) FROM students GROUP BY ROLLUP (major, sex)"
    result = students.query(sql, "alice")
    assert result.aggregates == (2, 3)
    flagged = result.with_flag_columns()
    assert flagged.columns == ["major", "sex", "count", "count_flag", "avg", "avg_flag", "grouping"]
    assert flagged.aggregates == (2, 4)
    pairs = zip(result.rows, result.flags, flagged.rows, flagged.flags, strict=True)
    for row, flags, out, out_flags in pairs:
        assert out == [row[0], row[1], row[2], flags[2], row[3], flags[3], row[4]]
        assert out_flags == [*flags[:3], "released", flags[3], "released", flags[4]]
        for value, flag in ((out[2], out[3]), (out[4], out[5])):
            assert (value is None) == (flag == "suppressed")
    assert "suppressed" in [row[3] for row in flagged.rows]
    assert flagged.notes == result.notes


def test_noised_values_are_flagged_noised(tmp_path: Path) -> None:
    with Guard.open(ROOT / "policies/hospital-dp.yaml", state=tmp_path / "state") as guard:
        result = guard.query("SELECT town, COUNT(*) FROM hospital GROUP BY town", "alice")
    frame = result.to_pandas(flags=True)
    assert list(frame.columns) == ["town", "count", "count_flag"]
    assert set(frame["count_flag"]) == {"noised"}
    assert frame["town"].tolist() == [row[0] for row in result.rows]


def test_withholding_keeps_the_aggregate_columns() -> None:
    result = ProtectedResult(["k", "n"], [["a", 5], ["b", 4]], [["released"] * 2] * 2, [], (1,))
    hidden = result.withholding([(1, 1)])
    assert hidden.aggregates == (1,)
    assert hidden.with_flag_columns().rows == [["a", 5, "released"], ["b", None, "suppressed"]]
    assert not hidden.nothing_released
    assert result.withholding([(0, 1), (1, 1)]).nothing_released


def test_unknown_aggregate_columns_flag_every_column() -> None:
    result = ProtectedResult(["k", "n"], [["a", 5]], [["released", "noised"]])
    assert result.aggregates is None
    assert result.with_flag_columns().columns == ["k", "k_flag", "n", "n_flag"]
    assert result.with_flag_columns().rows == [["a", "released", 5, "noised"]]


@pytest.mark.parametrize(
    ("rows", "flags", "aggregates", "nothing"),
    [
        ([], [], (1,), False),  # no rows: nothing withheld either
        ([["a"]], [["released"]], (), False),  # a list of values has no aggregate
        ([["a", None]], [["released", "suppressed"]], (1,), True),
        ([["a", None], ["b", 3]], [["released", "suppressed"], ["released", "noised"]], (1,), False),
    ],
)
def test_nothing_released(
    rows: list[list[object]], flags: list[list[str]], aggregates: tuple[int, ...], nothing: bool
) -> None:
    columns = ["k", "n"][: len(rows[0])] if rows else ["k", "n"]
    assert ProtectedResult(columns, rows, flags, [], aggregates).nothing_released is nothing


def test_every_value_withheld_from_the_guard(students: Guard) -> None:
    sql = "SELECT class, COUNT(*) FROM students WHERE class = 1979 GROUP BY class"
    assert students.query(sql, "alice").nothing_released
    assert not students.query("SELECT major, COUNT(*) FROM students GROUP BY major", "alice").nothing_released
