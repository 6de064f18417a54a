"""``guard explain`` says which sensitive cells each secondary cell protects.

The oracle is an LP over the Castro table's cells computed with pandas (``linprog``):
the released cells fixed at their true values, the withheld ones within [0, inf), the
row, column and grand totals as equations. A secondary cell protects a sensitive cell
when publishing it alone (with everything else as released) would leave the sensitive
cell's interval short of its protection levels (the seed's rules, computed from the
microdata in ``castro_truth``).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from scipy.optimize import linprog

import guard.protection.explain as explain_module
from guard import Guard
from guard.suppression import TOTAL
from tests.protection.conftest import castro_truth

CUBE = (
    "SELECT municipality, profession, SUM(salary) AS salary FROM castro "
    "GROUP BY CUBE (municipality, profession)"
)
LABEL = re.compile(r"municipality=(\w+), profession=(\w+)")


def _key(row: list[Any]) -> tuple[Any, Any]:
    return (TOTAL if row[0] is None else row[0], TOTAL if row[1] is None else row[1])


def _interval(
    values: dict[tuple[Any, Any], float], hidden: set[tuple[Any, Any]], target: tuple[Any, Any]
) -> tuple[float, float]:
    """[min, max] of ``target`` given the published cells and the table's totals."""
    towns = sorted({m for m, _ in values if m is not TOTAL})
    jobs = sorted({p for _, p in values if p is not TOTAL})
    cells = sorted(hidden, key=repr)
    index = {k: i for i, k in enumerate(cells)}
    rows, rhs = [], []
    # every total equals the sum of its parts: (M, TOTAL) = sum over P, and so on
    lines = [((m, TOTAL), [(m, p) for p in jobs]) for m in towns]
    lines += [((TOTAL, p), [(m, p) for m in towns]) for p in jobs]
    lines += [((TOTAL, TOTAL), [(m, TOTAL) for m in towns])]
    for total, parts in lines:
        row = np.zeros(len(cells))
        constant = 0.0
        for sign, key in [(-1.0, total), *((1.0, part) for part in parts)]:
            if key in index:
                row[index[key]] += sign
            else:
                constant += sign * values.get(key, 0.0)
        rows.append(row)
        rhs.append(-constant)
    ends = []
    for sign in (1.0, -1.0):
        objective = np.zeros(len(cells))
        objective[index[target]] = sign
        solved = linprog(objective, A_eq=np.array(rows), b_eq=np.array(rhs), bounds=[(0, None)] * len(cells))
        assert solved.status == 0
        ends.append(sign * solved.fun)
    return ends[0], ends[1]


def test_each_secondary_cell_names_the_sensitive_cells_it_protects(castro: Guard) -> None:
    explanation = castro.explain(CUBE, "alice")
    hidden = {_key(row) for row in castro.query(CUBE, "alice").rows if row[2] is None}
    table, verdicts = castro_truth()
    values = {k: table.value(k) for k in table.keys}
    sensitive = {k for k, v in verdicts.items() if v.sensitive}
    secondary = [c for c in explanation.cells if c.status.startswith("secondary")]
    assert len(secondary) >= 2
    for cell in secondary:
        found = LABEL.fullmatch(cell.cell)
        assert found is not None
        key = (found.group(1), found.group(2))
        # the oracle: the sensitive cells that publishing this one alone would expose
        exposed = set()
        for target in sensitive:
            low, high = _interval(values, hidden - {key}, target)
            needed_low, needed_high = (
                values[target] - verdicts[target].lower,
                values[target] + verdicts[target].upper,
            )
            if low > needed_low + 1e-6 or high < needed_high - 1e-6:
                exposed.add(target)
        assert exposed, "each secondary cell of this minimal pattern is needed by some sensitive cell"
        named = {(m, p) for m, p in LABEL.findall(cell.status.split(" for ", 1)[1])}
        assert named == exposed, (cell.cell, cell.status)


def test_attribution_over_its_time_budget_says_so(castro: Guard, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(explain_module, "MAX_ATTRIBUTION_SECONDS", 0.0)
    secondary = [c for c in castro.explain(CUBE, "alice").cells if c.status.startswith("secondary")]
    assert secondary
    for cell in secondary:
        assert (
            cell.status == "secondary (which sensitive cells it protects: not computed, over the time budget)"
        )


def test_cells_of_a_linked_problem_too_large_to_solve_have_no_interval(
    castro: Guard, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few new cells over a linked problem too large to solve online are withheld
    unless published cells fix them: no pattern is solved, so explain shows no
    interval and claims nothing about the sensitive cells (it showed (-inf, inf) and
    "meets" before)."""
    import guard.protection.decide as decide

    monkeypatch.setattr(decide, "MAX_LINKED_REQUIREMENTS", 0)  # Castro's 3 sensitive cells are "many"
    monkeypatch.setattr(decide, "MAX_STANDING_CELLS", 0)
    castro.query("SELECT municipality, SUM(salary) AS salary FROM castro GROUP BY municipality", "alice")
    explanation = castro.explain(CUBE, "alice")
    assert explanation.methods["sum(salary)"] == "withheld"
    assert explanation.cells
    for cell in explanation.cells:
        assert cell.status.endswith(
            "(not solved: the problem linked to earlier releases is too large to solve online)"
        )
        assert np.isnan(cell.low) and np.isnan(cell.high) and cell.meets is None
    # what it withholds is what the query withholds: every interior cell and margin not fixed
    answer = castro.query(CUBE, "alice")
    assert explanation.result.flags == answer.flags


def test_an_attribution_lp_that_fails_is_said_not_guessed(
    castro: Guard, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An LP of the attribution that HiGHS cannot solve leaves that cell's sensitive cells
    unnamed, with why, and the explanation is still given."""
    calls = [0]
    real = explain_module.failures

    def failing(*args: Any, **kw: Any) -> Any:
        calls[0] += 1
        if calls[0] > 1:  # the first call checks the pattern itself
            raise ValueError("audit LP failed")
        return real(*args, **kw)

    monkeypatch.setattr(explain_module, "failures", failing)
    secondary = [c for c in castro.explain(CUBE, "alice").cells if c.status.startswith("secondary")]
    assert secondary
    said = "secondary (which sensitive cells it protects: not computed, an LP failed)"
    assert all(c.status == said for c in secondary)
