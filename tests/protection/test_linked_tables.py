"""Tables released one after the other are protected together (issue 3, linked tables)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from guard import Guard
from guard.errors import QueryRefused
from guard.suppression import TOTAL, Key, failures
from tests.protection.conftest import castro_truth

DETAIL = "SELECT municipality, profession, SUM(salary) FROM castro GROUP BY municipality, profession"
CUBE_SQL = "SELECT municipality, profession, SUM(salary) FROM castro GROUP BY CUBE (municipality, profession)"
BY_TOWN = "SELECT municipality, SUM(salary) FROM castro GROUP BY municipality"
BY_JOB = "SELECT profession, SUM(salary) FROM castro GROUP BY profession"
TOTAL_SQL = "SELECT SUM(salary) FROM castro"


def _published(guard: Guard, queries: list[tuple[str, str]]) -> set[Key]:
    """Cells the attacker holds after ``queries`` (refused ones publish nothing)."""
    known: set[Key] = set()
    for analyst, sql in queries:
        try:
            result = guard.query(sql, analyst)
        except QueryRefused:
            continue
        names = result.columns
        for row in result.rows:
            if row[-1] is None:
                continue
            m = row[names.index("municipality")] if "municipality" in names else TOTAL
            p = row[names.index("profession")] if "profession" in names else TOTAL
            known.add((m, p))
    return known


def _attacker_fails(known: set[Key]) -> None:
    table, verdicts = castro_truth()
    requirements = {k: v for k, v in verdicts.items() if v.sensitive}
    hidden = set(table.keys) - known
    assert failures(table, hidden, requirements) == []


@pytest.mark.parametrize(
    "order",
    [
        [DETAIL, BY_TOWN, BY_JOB, TOTAL_SQL],
        [TOTAL_SQL, BY_JOB, BY_TOWN, DETAIL],
        [BY_TOWN, DETAIL, TOTAL_SQL, BY_JOB],
        [TOTAL_SQL, DETAIL],
    ],
)
def test_margins_released_later_never_reveal_a_suppressed_cell(castro: Guard, order: list[str]) -> None:
    _attacker_fails(_published(castro, [("alice", sql) for sql in order]))


def test_a_margin_after_the_detail_withholds_the_totals_of_suppressed_cells(castro: Guard) -> None:
    detail = castro.query(DETAIL, "alice")
    assert sum(row[2] is None for row in detail.rows) == 3  # no relation inside: primaries only
    towns = castro.query(BY_TOWN, "alice")
    # each town has a withheld cell, so each town total would give it away
    assert [row[1] for row in towns.rows] == [None, None, None]
    assert "secondary" in " ".join(towns.notes)


def test_grand_total_before_the_detail_links_through_unreleased_margins(castro: Guard) -> None:
    assert castro.explain(DETAIL, "alice").methods["sum(salary)"] == "none"  # nothing to link yet
    castro.query(TOTAL_SQL, "alice")
    # the total relates to the detail cells although no margin was released: the three
    # primaries now share one published sum (745), which still leaves each wide enough
    explanation = castro.explain(DETAIL, "alice")
    assert explanation.methods["sum(salary)"] != "none"
    assert all(c.meets for c in explanation.cells if c.required is not None)
    assert any(c.high < float("inf") for c in explanation.cells)


def test_colluding_analysts_share_one_history_by_default(castro: Guard) -> None:
    _attacker_fails(_published(castro, [("alice", DETAIL), ("bob", BY_TOWN), ("bob", BY_JOB)]))


def test_analyst_scope_protects_each_analyst_separately(open_variant: Callable[..., Guard]) -> None:
    def per_analyst(policy: dict[str, Any]) -> None:
        policy["protection"]["suppression"]["linked"] = "analyst"
        # alice and bob isolated for the history audit too (by default it is collusion-safe
        # and would withhold bob's table as well)
        policy["protection"]["history"] = {"groups": {"a": ["alice"], "b": ["bob"]}}

    guard = open_variant("castro", per_analyst)
    guard.query(DETAIL, "alice")
    assert [row[1] for row in guard.query(BY_TOWN, "alice").rows] == [None, None, None]
    assert all(row[1] is not None for row in guard.query(BY_TOWN, "bob").rows)


def test_history_survives_a_restart(tmp_path: Any) -> None:
    from tests.conftest import POLICIES

    with Guard.open(POLICIES / "castro.yaml", state=tmp_path / "s") as guard:
        guard.query(DETAIL, "alice")
    with Guard.open(POLICIES / "castro.yaml", state=tmp_path / "s") as guard:
        assert [row[1] for row in guard.query(BY_TOWN, "alice").rows] == [None, None, None]


def test_baker_differencing_is_refused(students: Guard) -> None:
    """Seed 002: SUM(income) for EE minus for male EE is Baker's income."""
    ee = students.query("SELECT SUM(income) FROM students WHERE major = 'EE'", "alice")
    assert ee.rows == [[240000]]
    with pytest.raises(QueryRefused, match="secondary cell suppression"):
        students.query("SELECT SUM(income) FROM students WHERE sex = 'Male' AND major = 'EE'", "alice")
    # the other analyst cannot complete the pair either (collusion)
    with pytest.raises(QueryRefused, match="secondary cell suppression"):
        students.query("SELECT SUM(income) FROM students WHERE major = 'EE' AND sex = 'Male'", "bob")
    refused = [r for r in students.log() if r["decision"] == "refused"]
    assert len(refused) == 2 and all("50000" not in r["reason"] for r in refused)


def _past_the_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every linked problem too large to solve online: no requirement proven at the
    least pattern (as when its proofs run out of budget), and no room for one."""
    from guard.protection import decide
    from guard.suppression.standing import Standing

    monkeypatch.setattr(decide, "MAX_LINKED_REQUIREMENTS", 0)
    monkeypatch.setattr(decide, "prove_standing", lambda *_, **__: Standing(frozenset()))


def test_few_new_cells_over_a_large_linked_problem_are_withheld(
    castro: Guard, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the online size limit, an answer of few new cells publishes nothing new."""
    _past_the_size_limit(monkeypatch)
    castro.query(DETAIL, "alice")
    with pytest.raises(QueryRefused, match="secondary cell suppression"):
        castro.query(TOTAL_SQL, "alice")
    towns = castro.query(BY_TOWN, "alice")
    assert [row[1] for row in towns.rows] == [None, None, None]
    assert any("too large to solve online" in note for note in towns.notes)
    assert not any("(method: )" in note for note in towns.notes)


def test_a_new_cell_the_published_cells_fix_is_released_past_the_size_limit(
    castro: Guard, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the online size limit, a new cell whose value the published cells already
    fix (the grand total after every town's total) tells no one anything: it is
    released, where every other new cell stays withheld (the professions, which the
    towns do not fix)."""
    _past_the_size_limit(monkeypatch)
    towns = castro.query(BY_TOWN, "alice")
    assert all(row[1] is not None for row in towns.rows)
    jobs = castro.query(BY_JOB, "alice")
    assert all(row[1] is None for row in jobs.rows)
    (total,) = castro.query(TOTAL_SQL, "alice").rows
    assert total[0] == sum(row[1] for row in towns.rows)  # what the towns already said


@pytest.mark.parametrize("sql", [DETAIL, CUBE_SQL])
def test_explain_of_a_repeated_answer_shows_the_intervals_the_history_leaves(castro: Guard, sql: str) -> None:
    """A repeat is decided by the earlier release (a replay); explain still solves it
    with every cell fixed, so each withheld cell has its feasibility interval, the same
    ones the first explanation showed, and every sensitive cell meets its levels."""
    first = castro.explain(sql, "alice")
    castro.query(sql, "alice")
    again = castro.explain(sql, "alice")
    assert again.methods["sum(salary)"].startswith("as released before")
    assert again.result.rows == castro.query(sql, "alice").rows
    shown = {c.cell: (c.low, c.high) for c in again.cells}
    assert shown and all(low == low and high == high for low, high in shown.values())  # no NaN
    assert all(c.meets for c in again.cells if c.required is not None)
    assert shown == {c.cell: (c.low, c.high) for c in first.cells}


def test_a_cell_the_history_already_determines_is_released_past_the_size_limit(
    castro: Guard, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the detail, the grand total alone is withheld past the size limit (the test
    above). Asked as a range over every row first, the same total is judged by the
    history audit on its rows; once it is released, the grand total is a value the
    earlier answers already determine: published, it tells no one anything, so it is
    released too, with the same value."""
    _past_the_size_limit(monkeypatch)
    castro.query(DETAIL, "alice")
    (everyone,) = castro.query("SELECT SUM(salary) FROM castro WHERE profession >= 'P1'", "alice").rows
    assert everyone[0] is not None
    (total,) = castro.query(TOTAL_SQL, "alice").rows
    assert total[0] == everyone[0]


def test_a_budget_that_ran_out_is_not_reported_as_a_recomputation(
    castro: Guard, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fail closed, but say why: an answer refused because the insider audit ran out of
    its budget is not told that a protected cell could be recomputed (nothing was found);
    a proven infeasibility still is."""
    import guard.protection.decide as decide_module
    from guard.suppression import ProtectionInfeasible, ProtectionUnverified

    castro.query(BY_TOWN, "alice")

    def unverified(*args: Any, **kwargs: Any) -> Any:
        raise ProtectionUnverified("the insider audit did not finish within its budget")

    monkeypatch.setattr(decide_module, "suppress", unverified)
    with pytest.raises(QueryRefused, match="did not finish within its budget") as refused:
        castro.query(DETAIL, "alice")
    assert "recomputed" not in str(refused.value)

    def infeasible(*args: Any, **kwargs: Any) -> Any:
        raise ProtectionInfeasible("no pattern")

    monkeypatch.setattr(decide_module, "suppress", infeasible)
    with pytest.raises(QueryRefused, match="recomputed"):
        castro.query(DETAIL, "alice")
