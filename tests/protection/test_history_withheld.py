"""Cells the exact history audit withholds after the suppression published them are
withheld in the linked history too (guard.protection.screened).

One person earns nearly all of her region-and-sex group's income, alone in her job. A
region x sex table would narrow her income from above (the group's sum less nobody's
income is at least hers), so the history audit withholds her group and the totals
above it. Recorded as published, those cells were taken as known by the next table's
protection problem: a region x job table, safe given the first, was refused because
no pattern could hide her from a total nobody had seen. The oracle is an LP written
here over the finest cells (region x sex x job) with every published cell fixed; the
same LP over the cells published with the two tables asked without protection shows
the recomputation is real.

With the history audit off, the first table is released whole and caps her income: the
second is then answered through the decision's retry with her levels capped at the
widest interval the first left (guard.suppression.widest), and refused without it.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
import yaml
from scipy.optimize import linprog

from guard import Guard
from guard.errors import GuardError

REGIONS, SEXES, JOBS = ("r0", "r1", "r2"), ("s0", "s1"), ("j0", "j1", "j2", "j9")
RICH = 50_000_000.0
UPPER = 100_000_000
FIRST = "SELECT region, sex, SUM(income) FROM people GROUP BY CUBE (region, sex)"
SECOND = "SELECT region, job, SUM(income) FROM people GROUP BY CUBE (region, job)"


def _data(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 400
    frame = pd.DataFrame(
        {
            "person": np.arange(1, n + 1),
            "region": rng.choice(REGIONS, n),
            "sex": rng.choice(SEXES, n),
            "job": rng.choice(JOBS[:3], n),
            "income": rng.lognormal(10, 0.5, n).round(2),
        }
    )
    frame.loc[0, ["region", "sex", "job", "income"]] = ["r0", "s0", "j9", RICH]
    return frame


def _policy(folder: Path, data: pd.DataFrame) -> Path:
    data.to_parquet(folder / "people.parquet", index=False)
    columns: dict[str, object] = {"person": {"role": "identifier"}}
    columns.update({d: {"role": "dimension"} for d in ("region", "sex", "job")})
    columns["income"] = {"role": "measure", "bounds": [0, UPPER]}
    policy = {
        "name": "screened",
        "protection": {"min_query_set_size": 5, "rules": [{"threshold": 10}]},
        "tables": {
            "people": {"source": {"parquet": "people.parquet"}, "privacy_unit": "person", "columns": columns}
        },
        "analysts": {"analyst": {}},
    }
    path = folder / "policy.yaml"
    path.write_text(yaml.safe_dump(policy, sort_keys=False))
    return path


def _published(rows: list[list[object]], flags: list[list[str]]) -> dict[tuple[object, object], float]:
    return {
        (row[0], row[1]): float(row[2])  # type: ignore[arg-type]
        for row, flag in zip(rows, flags, strict=True)
        if flag[2] != "suppressed"
    }


def _finest_interval(
    data: pd.DataFrame, tables: list[tuple[dict, int]], cells: list[tuple[str, str, str]]
) -> tuple[float, float]:
    """The interval of the sum of ``cells`` over the finest cells (region x sex x job,
    each between 0 and its count times the declared upper bound), every published cell of
    ``tables`` fixed (each with the position of its second dimension in a finest cell)."""
    finest = list(itertools.product(REGIONS, SEXES, JOBS))
    counts = data.groupby(["region", "sex", "job"]).size()
    bounds = [(0.0, float(counts.get(cell, 0)) * UPPER) for cell in finest]
    rows, rhs = [], []
    for published, position in tables:
        for (region, other), value in published.items():
            rows.append(
                [
                    1.0
                    if (region is None or cell[0] == region) and (other is None or cell[position] == other)
                    else 0.0
                    for cell in finest
                ]
            )
            rhs.append(value)
    target = np.array([1.0 if cell in cells else 0.0 for cell in finest])
    low = linprog(target, A_eq=rows or None, b_eq=rhs or None, bounds=bounds, method="highs")
    high = linprog(-target, A_eq=rows or None, b_eq=rhs or None, bounds=bounds, method="highs")
    assert low.status == 0 and high.status == 0
    return float(low.fun), float(-high.fun)


def _rich_interval(data: pd.DataFrame, first: dict, second: dict) -> tuple[float, float]:
    """Her cell's (r0, s0, j9) interval, every published cell of both tables fixed."""
    return _finest_interval(data, [(first, 1), (second, 2)], [("r0", "s0", "j9")])


@pytest.mark.parametrize("seed", range(3))
def test_a_table_after_cells_the_history_audit_withheld_is_answered_and_hides_her(
    seed: int, tmp_path: Path
) -> None:
    data = _data(seed)
    path = _policy(tmp_path, data)
    with Guard.open(path, state=tmp_path / "state") as guard:
        first = guard.query(FIRST, "analyst")
        assert any("history audit" in note for note in first.notes)
        second = guard.query(SECOND, "analyst")  # refused when the withheld cells counted as published
    shown_first = _published(first.rows, first.flags)
    shown_second = _published(second.rows, second.flags)
    assert len(shown_second) >= 12  # her job's cells and the totals above them, no more
    low, high = _rich_interval(data, shown_first, shown_second)
    level = 0.1 * RICH  # the threshold rule's levels on her cell (10 % each way)
    assert low <= RICH - level and high >= RICH + level

    # the attack is real: the same two tables without protection pin her income
    def total(column: str, a: object, b: object) -> float:
        rows = np.ones(len(data), dtype=bool)
        if a is not None:
            rows &= (data.region == a).to_numpy()
        if b is not None:
            rows &= (data[column] == b).to_numpy()
        return float(data.income[rows].sum())

    grouped = {(r, s): total("sex", r, s) for r in (*REGIONS, None) for s in (*SEXES, None)}
    by_job = {(r, j): total("job", r, j) for r in (*REGIONS, None) for j in (*JOBS, None)}
    low, high = _rich_interval(data, grouped, by_job)
    assert high < RICH + level


def test_a_repeat_withholds_them_again_as_the_history_audits_and_explain_says_so(tmp_path: Path) -> None:
    path = _policy(tmp_path, _data(0))
    with Guard.open(path, state=tmp_path / "state") as guard:
        first = guard.query(FIRST, "analyst")
        again = guard.query(FIRST, "analyst")
        explained = guard.explain(FIRST, "analyst")
    assert again.flags == first.flags
    withheld = sum(flag[2] == "suppressed" for flag in first.flags)
    assert withheld and any(
        note.startswith(
            f"{withheld} of 12 cells withheld, as when they were asked before, by the exact history audit"
        )
        for note in again.notes
    )
    assert [c.status for c in explained.cells] == ["history audit"] * withheld
    # and so after a restart, from the store
    with Guard.open(path, state=tmp_path / "state") as guard:
        assert guard.query(FIRST, "analyst").flags == first.flags
        assert guard.query(SECOND, "analyst").rows


@pytest.mark.parametrize("seed", range(2))
def test_with_the_history_audit_off_a_cell_the_first_table_narrowed_is_capped_not_refused(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the history audit the region x sex table is released whole: it caps her
    income at her group's sum, narrower than her cell's levels. Her cell is in no answer,
    so the region x job table is held to what the first left her (her levels capped at
    the widest interval, guard.suppression.widest) instead of refused; three colleagues
    in her job (sex s1) keep the table's own cell protectable. The answer must neither
    narrow her cell further nor leave its own sensitive cell short of its levels; without
    the cap it is refused."""
    data = _data(seed)
    for i in (1, 3, 4):
        data.loc[i, ["region", "sex", "job", "income"]] = ["r0", "s1", "j9", 3_000_000.0 + i]
    data.loc[2, ["region", "sex", "job", "income"]] = ["r0", "s1", "j0", 20_000_000.0]
    path = _policy(tmp_path, data)
    policy = yaml.safe_load(path.read_text())
    policy["protection"]["history"] = {"audit": "off"}
    path.write_text(yaml.safe_dump(policy))
    with Guard.open(path, state=tmp_path / "state") as guard:
        first = guard.query(FIRST, "analyst")
        second = guard.query(SECOND, "analyst")
    shown = _published(first.rows, first.flags)
    assert len(shown) == 12  # the first table is released whole
    her = [("r0", "s0", "j9")]
    widest = _finest_interval(data, [(shown, 1)], her)
    assert widest[1] < RICH + 0.1 * RICH  # the first table alone narrows her from above
    both = [(shown, 1), (_published(second.rows, second.flags), 2)]
    low, high = _finest_interval(data, both, her)
    assert high >= widest[1] - 1e-3 and low <= RICH - 0.1 * RICH
    job = [("r0", s, "j9") for s in SEXES]
    value = float(data[(data.region == "r0") & (data.job == "j9")].income.sum())
    low, high = _finest_interval(data, both, job)
    assert low <= 0.9 * value + 1e-3 and high >= 1.1 * value - 1e-3

    import guard.protection.decide as decide_module

    monkeypatch.setattr(decide_module, "requirements_within_widest", lambda table, levels, *_: levels)
    with Guard.open(path, state=tmp_path / "uncapped") as guard:
        guard.query(FIRST, "analyst")
        with pytest.raises(GuardError):
            guard.query(SECOND, "analyst")


def test_a_repeat_names_the_control_that_withheld_its_cells_also_after_a_restart(tmp_path: Path) -> None:
    """The store keeps each cell the history audit withheld with the audit's control, so a
    repeat's note names that control again, from memory and after a restart from the
    store. Before, the repeat's note said "a total that the sensitivity rules protect"
    whatever the control (bench_first's q12 withholds 1,854 cells over the search budget)."""
    path = _policy(tmp_path, _data(0))
    with Guard.open(path, state=tmp_path / "state") as guard:
        first = guard.query(FIRST, "analyst")
        again = guard.query(FIRST, "analyst")
    with Guard.open(path, state=tmp_path / "state") as guard:
        restarted = guard.query(FIRST, "analyst")
    [named] = [note for note in first.notes if "history audit" in note]
    reason = named.split("withheld by the ", 1)[1]  # "exact history audit: with answers ..."
    assert reason.startswith("exact history audit") and "sensitivity rules protect" in reason
    for repeat in (again, restarted):
        assert repeat.flags == first.flags
        [replayed] = [note for note in repeat.notes if "history audit" in note]
        assert replayed.endswith(f"withheld, as when they were asked before, by the {reason}")


def test_a_cell_recorded_without_its_control_is_named_by_the_history_audit_alone(tmp_path: Path) -> None:
    """A store written before the control was kept holds only that the history audit
    withheld the cell: the repeat's note names the audit, points to the first answer's
    note and claims no one control."""
    path = _policy(tmp_path, _data(0))
    with Guard.open(path, state=tmp_path / "state") as guard:
        first = guard.query(FIRST, "analyst")
    [store] = list((tmp_path / "state").glob("*.duckdb"))
    con = duckdb.connect(str(store))
    con.execute(
        "UPDATE released_cells SET status = 'withheld-by-history' WHERE status LIKE 'withheld-by-history:%'"
    )
    con.close()
    with Guard.open(path, state=tmp_path / "state") as guard:
        again = guard.query(FIRST, "analyst")
    assert again.flags == first.flags
    [replayed] = [note for note in again.notes if "history audit" in note]
    assert (
        "as when they were asked before, by the exact history audit, for the control that answer's"
        in replayed
    )
    assert "sensitivity rules protect" not in replayed
