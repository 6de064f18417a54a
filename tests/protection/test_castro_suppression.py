"""Issue 3 through the guard: the seed magnitude table (seed 000, Castro 2012)."""

from __future__ import annotations

from typing import Any

from guard import Guard
from guard.suppression import TOTAL, audit, failures
from tests.protection.conftest import castro_truth

CUBE = (
    "SELECT municipality, profession, SUM(salary) AS salary FROM castro "
    "GROUP BY CUBE (municipality, profession)"
)
PRIMARY = {("M1", "P1"), ("M2", "P3"), ("M3", "P5")}


def _key(row: list[Any]) -> tuple[Any, Any]:
    return (TOTAL if row[0] is None else row[0], TOTAL if row[1] is None else row[1])


def _hidden(result: Any) -> set[tuple[Any, Any]]:
    return {_key(row) for row in result.rows if row[2] is None}


def test_exactly_the_seed_cells_are_primary(castro: Guard) -> None:
    explanation = castro.explain(CUBE, "alice")
    primary = {c.cell for c in explanation.cells if c.status.startswith("primary")}
    assert primary == {f"municipality={m}, profession={p}" for m, p in PRIMARY}
    assert all(c.meets for c in explanation.cells if c.required is not None)


def test_released_cube_protects_every_sensitive_cell(castro: Guard) -> None:
    result = castro.query(CUBE, "alice")
    table, verdicts = castro_truth()
    hidden = _hidden(result)
    sensitive = {k for k, v in verdicts.items() if v.sensitive}
    assert sensitive == PRIMARY
    assert hidden > PRIMARY, "secondary cells must join the primaries"
    # an attacker's LP over exactly what was released, with the true values
    requirements = {k: verdicts[k] for k in sensitive}
    assert failures(table, hidden, requirements) == []
    for key in PRIMARY:
        low, high = audit(table, hidden, cells=[key])[key]
        assert high - low >= verdicts[key].upper + verdicts[key].lower - 1e-6
    # released cells carry their true values
    for row in result.rows:
        if row[2] is not None:
            assert row[2] == table.value(_key(row))


def test_notes_count_cells_and_name_rules_without_values(castro: Guard) -> None:
    result = castro.query(CUBE, "alice")
    text = " ".join(result.notes)
    assert "3 of 24 cells suppressed as sensitive" in text
    assert "dominance(n=1, k=0.5)" in text and "threshold(t=3)" in text
    assert "secondary" in text and "LP audit" in text
    for hidden_value in ("360", "363", "350", "200", "160"):
        assert hidden_value not in text


def test_primary_suppression_alone_would_be_recomputable() -> None:
    table, verdicts = castro_truth()
    requirements = {k: v for k, v in verdicts.items() if v.sensitive}
    # withholding only the primaries: (M2,P3) = row total - the other cells
    assert failures(table, set(requirements), requirements)


def test_repeated_and_rephrased_queries_get_the_same_pattern(castro: Guard) -> None:
    first = castro.query(CUBE, "alice")
    again = castro.query(CUBE, "alice")
    assert again.rows == first.rows and again.flags == first.flags
    swapped = castro.query(
        "SELECT profession, municipality, SUM(salary) FROM castro GROUP BY CUBE (profession, municipality)",
        "bob",
    )
    assert {(_key([r[1], r[0]]), r[2]) for r in swapped.rows} == {(_key(r), r[2]) for r in first.rows}


def test_count_table_is_protected_by_the_threshold_rule(castro: Guard) -> None:
    result = castro.query(
        "SELECT municipality, profession, COUNT(*) AS n FROM castro GROUP BY CUBE (municipality, profession)",
        "alice",
    )
    cells = {_key(row): row[2] for row in result.rows}
    assert cells[("M1", "P1")] is None and cells[("M2", "P3")] is None
    assert cells[(TOTAL, TOTAL)] == 346
    # the dominated cell has 5 people: its count is not sensitive
    hidden = {k for k, v in cells.items() if v is None}
    assert len(hidden) > 2  # secondary cells protect the two small counts


def test_explain_states_a_filter_the_keys_do_not(castro: Guard) -> None:
    """A range or a disjunction is not a key of the table: explain shows it after each
    cell's key, so the cell is not mistaken for the unfiltered one."""
    filtered = castro.explain(
        "SELECT municipality, profession, SUM(salary) FROM castro "
        "WHERE profession >= 'P1' OR municipality = 'M9' GROUP BY municipality, profession",
        "alice",
    )
    assert filtered.cells and all(
        c.cell.endswith("(where (\"municipality\" = 'M9' OR \"profession\" >= 'P1'))") for c in filtered.cells
    )
    keyed = castro.explain(
        "SELECT profession, SUM(salary) FROM castro WHERE municipality = 'M1' GROUP BY profession", "alice"
    )
    assert keyed.cells and not any("where" in c.cell for c in keyed.cells)
