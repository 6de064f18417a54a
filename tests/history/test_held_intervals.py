"""``guard explain`` bounds each value the history audit would withhold by what the
released answers leave of it (guard.history.heldintervals).

The oracle knows nothing of the guard's atoms: it is an LP over the raw rows (scipy's
``linprog``). A SUM: one variable per row within the measure's declared bounds, one
equation per value released so far (the answers' unflagged values, and the explained
answer's own, which it would release), the held value's rows as the objective. A COUNT:
one variable per group of rows equal on every dimension (what the analyst does not know
is how many rows each holds), within 0 .. N, the released counts as equations.
"""

from __future__ import annotations

import contextlib
import math
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pyroaring import BitMap
from scipy.optimize import linprog

from guard import Guard
from guard.errors import QueryRefused
from guard.history.atomlp import AtomIntervals, atoms_of
from guard.history.heldintervals import MAX_HELD_INTERVALS
from guard.result import Flag

from .history_helpers import STUDENTS_CSV, students_policy, unlinked
from .skewed import BOUNDS, DIMENSIONS, skewed_table

_WITHHELD = Flag.SUPPRESSED.value
Condition = tuple[str, str, str]  # (dimension, "=" or "<>", value)


def _data(folder: Path, seed: int) -> tuple[Path, pd.DataFrame]:
    return skewed_table(folder, seed, 120)


def _question(rng: np.random.Generator) -> tuple[list[Condition], str | None]:
    names = list(DIMENSIONS)
    conditions = []
    for name in rng.choice(names, int(rng.integers(0, 3)), replace=False).tolist():
        value = DIMENSIONS[name][int(rng.integers(len(DIMENSIONS[name])))]
        conditions.append((name, "=" if rng.random() < 0.5 else "<>", value))
    group = names[int(rng.integers(len(names)))] if rng.random() < 0.5 else None
    return conditions, group


def _sql(conditions: list[Condition], group: str | None) -> str:
    where = " AND ".join(f"{d} {op} '{v}'" for d, op, v in conditions)
    where = f" WHERE {where}" if where else ""
    if group is None:
        return f"SELECT SUM(m), COUNT(*) FROM t{where}"
    return f"SELECT {group}, SUM(m), COUNT(*) FROM t{where} GROUP BY {group}"


def _mask(frame: pd.DataFrame, conditions: list[Condition]) -> pd.Series:
    mask = pd.Series(True, index=frame.index)
    for d, op, v in conditions:
        mask &= (frame[d] == v) if op == "=" else (frame[d] != v)
    return mask


Released = list[tuple[str, np.ndarray, float]]


def _released(
    frame: pd.DataFrame,
    conditions: list[Condition],
    group: str | None,
    rows: list[list[object]],
    flags: list[list[str]],
) -> Released:
    """(space, row mask, value) of each value an answer releases."""
    out: Released = []
    for row, flag in zip(rows, flags, strict=True):
        mask = _mask(frame, conditions)
        if group is not None:
            mask &= frame[group] == row[0]
        for value, f, space in zip(row[-2:], flag[-2:], ("sum(m)", "count"), strict=True):
            if value is not None and f != _WITHHELD:
                out.append((space, mask.to_numpy(), float(value)))  # type: ignore[arg-type]
    return out


def _oracle(frame: pd.DataFrame, released: Released, space: str, target: np.ndarray) -> tuple[float, float]:
    sets = [(m, v) for s, m, v in released if s == space]
    if space == "sum(m)":
        a_eq = np.array([m.astype(float) for m, _ in sets]).reshape(len(sets), len(frame))
        objective, bounds = target.astype(float), [BOUNDS] * len(frame)
    else:
        cell = frame.groupby(list(DIMENSIONS)).ngroup().to_numpy()
        onehot = np.eye(cell.max() + 1)[cell]  # rows x groups

        def over(mask: np.ndarray) -> np.ndarray:
            return np.asarray(onehot[mask].sum(axis=0) > 0, dtype=float)

        a_eq = np.array([over(m) for m, _ in sets]).reshape(len(sets), onehot.shape[1])
        objective, bounds = over(target), [(0.0, float(len(frame)))] * onehot.shape[1]
    b_eq = np.array([v for _, v in sets])
    ends = []
    for sign in (1.0, -1.0):
        equations = {"A_eq": a_eq, "b_eq": b_eq} if sets else {}
        solved = linprog(sign * objective, bounds=bounds, **equations)
        assert solved.status == 0
        ends.append(sign * solved.fun)
    return ends[0], ends[1]


@pytest.mark.parametrize("seed", range(3))
def test_held_values_intervals_match_a_row_lp(tmp_path: Path, seed: int) -> None:
    path, frame = _data(tmp_path, seed)
    rng = np.random.default_rng(200 + seed)
    released: Released = []
    checked: list[str] = []
    with Guard.open(path, state=tmp_path / "state") as guard:
        for _ in range(30):
            conditions, group = _question(rng)
            sql = _sql(conditions, group)
            try:
                explained = guard.explain(sql, "alice")
            except QueryRefused:
                continue
            shown = _released(frame, conditions, group, explained.result.rows, explained.result.flags)
            for cell in explained.cells:
                if not cell.status.startswith("exact history audit"):
                    continue
                label = cell.cell.split(" (where ")[0]
                target = _mask(frame, conditions).to_numpy().copy()
                if label != "all rows":
                    name, value = label.split("=")
                    target &= frame[name].to_numpy() == value.strip("'")
                low, high = _oracle(frame, released + shown, cell.quantity, target)
                assert cell.low == pytest.approx(low, abs=1e-6), (sql, cell)
                assert cell.high == pytest.approx(high, abs=1e-6), (sql, cell)
                assert cell.width == pytest.approx(high - low, abs=1e-6)
                assert high > low  # withheld: the releases do not determine it
                checked.append(cell.quantity)
            with contextlib.suppress(QueryRefused):
                answer = guard.query(sql, "alice")
                released += _released(frame, conditions, group, answer.rows, answer.flags)
    assert len(checked) >= 3 and set(checked) == {"sum(m)", "count"}, "the sequences reach the history audit"


def test_values_over_the_budget_have_no_interval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``MAX_HELD_INTERVALS`` values a held value is shown without an interval
    (NaN, "interval not computed"), never with a guessed one. Seed 002's pair: the EE
    total, then the male EE students' (Baker's income by difference)."""
    import guard.history.heldintervals as held

    path = _students(tmp_path)
    men = "SELECT SUM(income), COUNT(*) FROM students WHERE major = 'EE' AND sex = 'Male'"
    with Guard.open(path, state=tmp_path / "state") as guard:
        guard.query("SELECT SUM(income), COUNT(*) FROM students WHERE major = 'EE'", "alice")
        bounded = guard.explain(men, "alice").cells
        monkeypatch.setattr(held, "MAX_HELD_INTERVALS", 1)
        assert MAX_HELD_INTERVALS > 1
        budgeted = guard.explain(men, "alice").cells
    assert len(bounded) == len(budgeted) == 2
    assert all(c.width > 0 and not c.status.endswith("(interval not computed)") for c in bounded)
    assert budgeted[0] == bounded[0]
    last = budgeted[1]
    assert math.isnan(last.low) and math.isnan(last.high) and last.status.endswith("(interval not computed)")
    # out of time (MAX_INTERVAL_SECONDS): none computed, none guessed
    monkeypatch.setattr(held, "MAX_HELD_INTERVALS", 200)
    monkeypatch.setattr(held, "MAX_INTERVAL_SECONDS", 0.0)
    with Guard.open(path, state=tmp_path / "state") as guard:
        late = guard.explain(men, "alice").cells
    assert len(late) == 2
    assert all(math.isnan(c.low) and c.status.endswith("(interval not computed)") for c in late)


def test_a_solve_out_of_time_is_not_an_interval() -> None:
    """A solve stopped by its time limit gives no side (not a bound it had not proven),
    and is not retried from scratch."""
    sets = [(BitMap([0, 1, 2]), 150.0), (BitMap([1, 2, 3]), 120.0)]
    reach = np.arange(4)
    slot, atom = atoms_of(sets, reach, 4)
    model = AtomIntervals(sets, slot, atom, np.ones(4), (0.0, 100.0))
    first = np.unique(atom[[0]])
    model.limit(0.0)
    assert model.whole(first) == (None, None)
    model.limit(60.0)
    # row 0 = 150 - (rows 1 + 2), rows 1 + 2 = 120 - row 3 in [20, 120]: [30, 130] within [0, 100]
    assert model.whole(first) == pytest.approx((30.0, 100.0))


def test_the_lps_run_after_the_release_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An explanation's interval LPs (up to ``MAX_INTERVAL_SECONDS``) do not hold the
    analysts' answers back: while they run, another question is answered."""
    import guard.history.preview as preview_module

    answered: list[bool] = []
    solve = preview_module.explained_intervals

    def meanwhile(*args: Any, **kw: Any) -> Any:
        other = "SELECT COUNT(*) FROM students"
        asking = threading.Thread(target=lambda: guard.query(other, "bob"))
        asking.start()
        asking.join(timeout=30)
        answered.append(not asking.is_alive())
        return solve(*args, **kw)

    monkeypatch.setattr(preview_module, "explained_intervals", meanwhile)
    men = "SELECT SUM(income) FROM students WHERE major = 'EE' AND sex = 'Male'"
    with Guard.open(_students(tmp_path), state=tmp_path / "state") as guard:
        guard.query("SELECT SUM(income) FROM students WHERE major = 'EE'", "alice")
        (cell,) = guard.explain(men, "alice").cells
    assert answered == [True]
    assert (cell.low, cell.high) == (40000.0, 240000.0)


def _students(folder: Path) -> Path:
    """Seed 002's students, linked tables off (the history audit alone withholds the pair)."""
    return students_policy(folder, unlinked)


def test_releases_on_an_earlier_data_version_still_bound_it(tmp_path: Path) -> None:
    """The EE total released on one data version still pins the male EE students'
    total after a student of another major joins (the audit's rows are identities
    across versions): the same interval, from the earlier version's release."""
    csv = tmp_path / "students.csv"
    csv.write_text(STUDENTS_CSV.read_text())
    path = students_policy(tmp_path, unlinked, csv=csv)
    men = "SELECT SUM(income) FROM students WHERE major = 'EE' AND sex = 'Male'"
    with Guard.open(path, state=tmp_path / "state") as guard:
        guard.query("SELECT SUM(income) FROM students WHERE major = 'EE'", "alice")
    csv.write_text(csv.read_text() + "Newcomer,Female,Math,1981,70000\n")
    with Guard.open(path, state=tmp_path / "state") as guard:
        (cell,) = guard.explain(men, "alice").cells
        assert guard.query("SELECT COUNT(*) FROM students", "alice").rows == [[10]]  # the new version
    assert cell.status.startswith("exact history audit") and (cell.low, cell.high) == (40000.0, 240000.0)


def test_an_lp_that_breaks_leaves_the_value_unbounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The intervals are shown only: an LP that raises leaves the values without one
    ("interval not computed") and the explanation is still given."""
    import guard.history.heldintervals as held

    def broken(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("HiGHS failed")

    monkeypatch.setattr(held, "held_intervals", broken)
    men = "SELECT SUM(income) FROM students WHERE major = 'EE' AND sex = 'Male'"
    with Guard.open(_students(tmp_path), state=tmp_path / "state") as guard:
        guard.query("SELECT SUM(income) FROM students WHERE major = 'EE'", "alice")
        (cell,) = guard.explain(men, "alice").cells
    assert math.isnan(cell.low) and cell.status.endswith("(interval not computed)")
