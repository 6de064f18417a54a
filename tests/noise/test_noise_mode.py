"""Noise mode end to end: noisy answers, notes, caching by what is measured, budgets."""

from __future__ import annotations

import threading
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import pytest

from guard import Guard
from guard.errors import BackendError, BudgetExhausted, QueryRejected

from .conftest import write_policy

ENFIELD = "SELECT AVG(income) FROM hospital WHERE town = 'Enfield'"


def test_answers_are_flagged_noised_and_notes_state_scale_and_budget(dp: Guard) -> None:
    result = dp.query(
        "SELECT COUNT(*), SUM(income), AVG(income) FROM hospital WHERE town = 'Enfield'", "alice"
    )
    assert result.flags == [["noised", "noised", "noised"]]
    notes = " | ".join(result.notes)
    assert "ε = 1 spent on this query" in notes and "ε = 9 of 10 left for analyst 'alice'" in notes
    assert "count(*): noisy count (geometric), scale 4" in notes  # ε/4 over 4 statistics, Δ = 1
    assert "sum(income): noisy sum (Laplace on a grid), scale" in notes
    assert "values clamped to [1000, 100000]" in notes
    # neither the true sum (33000) nor the true mean (3300)
    assert "33000" not in notes and "3300" not in notes


def test_every_rephrasing_of_a_cell_gets_the_same_answer_for_free(dp: Guard) -> None:
    first = dp.query(ENFIELD, "alice")
    for sql in (
        "SELECT AVG(income) FROM hospital WHERE 'Enfield' = town",
        "SELECT AVG(income) FROM hospital WHERE town IN ('Enfield')",
        "SELECT AVG(income) AS m FROM hospital WHERE town IN ('Enfield', 'Barnet') AND town = 'Enfield'",
        "SELECT AVG(income) FROM hospital WHERE town = 'Enfield' AND town <> 'Camden'",
        "SELECT avg(INCOME) FROM hospital WHERE town BETWEEN 'Enfield' AND 'Enfield'",
    ):
        again = dp.query(sql, "alice")
        assert again.rows == first.rows, sql
        assert "no ε spent" in again.notes[0], sql
    # the Enfield cell of a GROUP BY is the same statistic, unless thresholded away
    grouped = dp.query("SELECT town, AVG(income) FROM hospital GROUP BY town", "alice")
    shown = {row[0]: row[1] for row in grouped.rows}
    if "Enfield" in shown:
        assert shown["Enfield"] == first.rows[0][0]
    assert dp.budget("alice")["accounts"][1]["spent"]["exact"] == "2"


def test_a_cached_answer_is_still_charged_once_to_each_analyst(dp: Guard) -> None:
    alice = dp.query(ENFIELD, "alice")
    bob = dp.query(ENFIELD, "bob")
    assert bob.rows == alice.rows
    report = dp.budget()
    spent = {a["account"]: a["spent"]["exact"] for a in report["accounts"]}
    # bob pays for what he learns; the data paid once (global)
    assert spent == {"global": "1", "analyst:alice": "1", "analyst:bob": "1"}


def test_budget_is_never_overspent_and_the_refusal_says_what_is_left(dp: Guard) -> None:
    towns = ["Barnet", "Camden", "Enfield", "Hackney", "Haringey", "Islington"]
    answered = 0
    for i in range(14):  # 14 different statistics
        aggregate = ("SUM(income)", "COUNT(*)", "AVG(income)")[i // 6]
        sql = f"SELECT {aggregate} FROM hospital WHERE town = '{towns[i % 6]}'"
        try:
            dp.query(sql, "alice")
            answered += 1
        except BudgetExhausted as refused:
            assert "privacy budget of analyst 'alice' is exhausted" in refused.message
            assert "ε = 0 of 10 left, this query needs ε = 1" in refused.message
    assert answered == 10
    # asking what was already answered costs nothing, even with no budget left
    assert dp.query("SELECT SUM(income) FROM hospital WHERE town = 'Barnet'", "alice").rows
    decisions = [r["decision"] for r in dp.log("alice")]
    assert decisions.count("refused") == 4 and decisions.count("answered") == 11


def test_budget_survives_a_restart(tmp_path: Path, open_guard: Callable[..., Guard]) -> None:
    policy = write_policy(tmp_path / "p")
    guard = open_guard(policy)
    first = guard.query(ENFIELD, "alice")
    guard.query("SELECT COUNT(*) FROM hospital", "alice")
    guard.close()
    reopened = open_guard(policy, seed=99)
    assert reopened.query(ENFIELD, "alice").rows == first.rows  # the draw, not a new one
    accounts = {a["account"]: a for a in reopened.budget("alice")["accounts"]}
    assert accounts["analyst:alice"]["spent"]["exact"] == "2"
    assert [c["sql"] for c in reopened.budget("alice")["charges"]] == [
        ENFIELD,
        "SELECT COUNT(*) FROM hospital",
    ]


def test_sixteen_threads_never_spend_more_than_the_budget(
    tmp_path: Path, open_guard: Callable[..., Guard]
) -> None:
    noise = "  mode: noise\n  epsilon_per_query: 1\n  budgets:\n    per_analyst: 10\n    global: 10\n"
    guard = open_guard(write_policy(tmp_path / "p", noise=noise))
    towns = ["Barnet", "Camden", "Enfield", "Hackney", "Haringey", "Islington", "Nowhere", "Atlantis"]
    outcomes: list[str] = []
    barrier = threading.Barrier(16)

    def ask(i: int) -> None:
        analyst = "alice" if i % 2 else "bob"
        sql = f"SELECT {'SUM(income)' if i < 8 else 'COUNT(*)'} FROM hospital WHERE town = '{towns[i % 8]}'"
        barrier.wait()
        try:
            guard.query(sql, analyst)
            outcomes.append("answered")
        except BudgetExhausted:
            outcomes.append("refused")

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count("answered") == 10 and outcomes.count("refused") == 6
    assert guard.noise is not None
    assert guard.noise.ledger.spent() == Fraction(10)
    assert sum(entry.amount("global") for entry in guard.store.ledger()) == Fraction(10)


def test_a_failed_log_write_charges_nothing_and_caches_nothing(
    dp: Guard, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object, **__: object) -> int:
        raise BackendError("cannot write the query log: disk full")

    monkeypatch.setattr(dp.store, "append", broken)
    with pytest.raises(BackendError):
        dp.query(ENFIELD, "alice")
    monkeypatch.undo()
    assert dp.noise is not None and dp.noise.ledger.spent("alice") == 0
    assert dp.store.noise_draws(dp.backend.table_info("hospital").data_version, "hospital") == {}


def test_group_threshold_hides_small_groups_and_notes_its_delta(dp: Guard) -> None:
    result = dp.query("SELECT town, COUNT(*) FROM hospital GROUP BY town", "alice")
    threshold_note = next(n for n in result.notes if "shown only when" in n)
    tau = int(threshold_note.split("at least ")[1].split()[0])
    assert "δ ≤ " in threshold_note and tau > 1
    assert all(row[1] >= tau for row in result.rows)


def test_a_group_made_by_one_patient_does_not_appear(
    tmp_path: Path, open_guard: Callable[..., Guard]
) -> None:
    data = tmp_path / "tiny.csv"
    data.write_text((tmp_path.parents[0] / "x").as_posix() and _with_tiny_town())
    for seed in range(40):
        guard = open_guard(write_policy(tmp_path / "p", csv=data), state=f"s{seed}", seed=seed)
        rows = guard.query("SELECT town, COUNT(*) FROM hospital GROUP BY town", "alice").rows
        assert "Tiny" not in {row[0] for row in rows}
        guard.close()


def _with_tiny_town() -> str:
    from .conftest import HOSPITAL

    return (HOSPITAL / "hospital.csv").read_text() + "H9999,Tiny,5000\n"


def test_explain_is_for_suppression_not_noise(dp: Guard) -> None:
    with pytest.raises(QueryRejected, match="answered to alice with noise"):
        dp.explain(ENFIELD, "alice")


def test_noise_mode_per_analyst(tmp_path: Path, open_guard: Callable[..., Guard]) -> None:
    noise = "  mode: off\n  budgets:\n    per_analyst: 5\n"
    analysts = "  alice: {}\n  bob: {noise: noise}\n"
    guard = open_guard(write_policy(tmp_path / "p", noise=noise, analysts=analysts))
    exact = guard.query("SELECT COUNT(*) FROM hospital WHERE town = 'Enfield'", "alice")
    assert exact.rows == [[10]] and exact.flags == [["released"]]
    noisy = guard.query("SELECT COUNT(*) FROM hospital WHERE town = 'Enfield'", "bob")
    assert noisy.flags == [["noised"]]


def test_noise_mode_per_table_overrides_the_policy(tmp_path: Path, open_guard: Callable[..., Guard]) -> None:
    noise = "  mode: off\n  budgets:\n    per_analyst: 5\n"
    guard = open_guard(write_policy(tmp_path / "p", noise=noise, tables_extra="    noise: noise\n"))
    assert guard.query(ENFIELD, "alice").flags == [["noised"]]


def test_clamped_mean_option_including_the_empty_case(
    tmp_path: Path, open_guard: Callable[..., Guard]
) -> None:
    noise = "  mode: noise\n  average: clamped_mean\n  budgets:\n    per_analyst: 5\n"
    guard = open_guard(write_policy(tmp_path / "p", noise=noise))
    result = guard.query("SELECT AVG(income) FROM hospital WHERE town = 'Nowhere'", "alice")
    assert result.flags == [["noised"]] and 1000 <= result.rows[0][0] <= 100000
    assert any("clamping-down mean (seed 001" in note for note in result.notes)


def test_panel_data_contributions_are_bounded(tmp_path: Path, open_guard: Callable[..., Guard]) -> None:
    # one patient with 50 visits in 5 towns: with m = 1 and c = 1 they count once, anywhere
    rows = ["patient_id,town,income"] + [f"P{i:03d},T{i % 5},{1000 + i}" for i in range(100)]
    rows += [f"P999,T{v % 5},100000" for v in range(50)]
    data = tmp_path / "panel.csv"
    data.write_text("\n".join(rows) + "\n")
    noise = "  mode: noise\n  epsilon_per_query: 1000\n  budgets:\n    per_analyst: 100000\n"
    guard = open_guard(write_policy(tmp_path / "p", csv=data, noise=noise))
    total = guard.query("SELECT COUNT(*) FROM hospital", "alice").rows[0][0]
    assert abs(total - 101) <= 5  # 100 patients + 1, not + 50 (noise scale 1/1000)
    per_town = guard.query("SELECT town, COUNT(*) FROM hospital GROUP BY town", "alice").rows
    assert abs(sum(row[1] for row in per_town) - 101) <= 10


def test_a_query_with_rows_of_no_group_and_order_limit(dp: Guard) -> None:
    result = dp.query(
        "SELECT town, COUNT(*) AS n FROM hospital GROUP BY ROLLUP(town) ORDER BY n DESC LIMIT 2", "alice"
    )
    assert len(result.rows) == 2 and result.rows[0][0] is None  # the grand total is largest
    assert result.rows[0][1] >= result.rows[1][1]


def test_charges_made_since_start_name_their_log_row_and_query(dp: Guard) -> None:
    dp.query(ENFIELD, "alice")
    [charge] = dp.budget("alice")["charges"]
    logged = dp.log(analyst="alice")[-1]
    assert charge["log_id"] == logged["id"] and charge["sql"] == ENFIELD


def test_notes_name_the_aggregate_whatever_the_column_label(dp: Guard) -> None:
    """Unaliased columns are labelled by their function (PostgreSQL's `sum`), which two
    columns may share: each note names the aggregate, and an alias with it."""
    sql = "SELECT SUM(income) AS total, AVG(income) FROM hospital WHERE town = 'Enfield'"
    result = dp.query(sql, "alice")
    assert result.columns == ["total", "avg"]
    notes = " | ".join(result.notes)
    assert "total (sum(income)): noisy sum" in notes
    assert "avg(income): " in notes


def test_or_and_not_beyond_one_comparison_are_answered_in_noise_mode_without_the_audit(
    tmp_path: Path, open_guard: Callable[..., Guard]
) -> None:
    """With the history audit off, a disjunction is allowed in noise mode only (each
    selection is paid for): answered, noised, and its re-phrasings share one answer."""
    policy = write_policy(tmp_path / "p")
    policy.write_text(policy.read_text() + "\nprotection:\n  history:\n    audit: off\n")
    guard = open_guard(policy)
    first = guard.query("SELECT COUNT(*) FROM hospital WHERE town < 'C' OR town > 'M'", "alice")
    assert first.flags[0][0] == "noised"
    for sql in (
        "SELECT COUNT(*) FROM hospital WHERE town > 'M' OR town < 'C'",
        "SELECT COUNT(*) FROM hospital WHERE NOT (town >= 'C' AND town <= 'M')",
        "SELECT COUNT(*) FROM hospital WHERE town NOT BETWEEN 'C' AND 'M'",
    ):
        again = guard.query(sql, "alice")
        assert again.rows == first.rows and "no ε spent" in again.notes[0], sql


def test_a_noisy_rollup_logs_each_sent_rows_grouping_set(dp: Guard) -> None:
    result = dp.query("SELECT town, SUM(income) FROM hospital GROUP BY ROLLUP (town)", analyst="alice")
    [record] = dp.log()
    levels = [record["levels"]["sets"][i] for i in record["levels"]["rows"]]
    assert levels == [[] if town is None else ["town"] for town, _ in result.rows]
    assert [] in levels and ["town"] in levels and "levels" not in result.to_dict()
