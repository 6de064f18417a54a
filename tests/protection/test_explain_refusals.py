"""``guard explain`` on a question the cell protection refuses: shown, not refused.

A steward explains a refused question to learn why. The explanation is the answer with
every value the protection withholds withheld, a last note saying the query would be
refused and why, and the cells with their intervals: which sensitive cell the withheld
values protect, or, where no pattern protects every sensitive cell, the intervals they
keep with every cell that can be withheld withheld. Asking stays refused, and nothing is
released.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from scipy.optimize import linprog

from guard import Guard
from guard.errors import QueryRefused
from guard.protection import decide
from guard.suppression import ProtectionInfeasible

STUDENTS_CSV = Path(__file__).resolve().parents[2] / "examples" / "students" / "students.csv"
EE = "SELECT SUM(income) FROM students WHERE major = 'EE'"
EE_MEN = "SELECT SUM(income) FROM students WHERE major = 'EE' AND sex = 'Male'"
CUBE = "SELECT municipality, profession, SUM(salary) FROM castro GROUP BY CUBE (municipality, profession)"


def test_baker_refused_is_explained_by_the_cell_it_protects(students: Guard) -> None:
    """Seed 002: after SUM(income) of EE, that of male EE students is Baker's income. The
    explanation withholds it as the complement of her never-released cell."""
    assert students.query(EE, "alice").rows == [[240000]]
    explained = students.explain(EE_MEN, "alice")
    assert explained.result.rows == [[None]] and explained.result.flags == [["suppressed"]]
    assert explained.result.notes[-1].startswith("asked, refused by secondary cell suppression")
    by_status = {c.status: c for c in explained.cells}
    baker = by_status["never released; sensitive: query-set-size(k=3)"]
    assert baker.cell.startswith("sex=Female, major=EE") and baker.meets is True
    assert baker.width >= baker.required  # type: ignore[operator]
    # published, the men's total would give her income away: it is withheld for her cell
    men = by_status["secondary for sex=Female, major=EE, class=(all) (query-set-size(k=3))"]
    assert men.cell.startswith("sex=Male, major=EE") and men.width > 0
    assert "50000" not in repr(explained.result.rows)
    with pytest.raises(QueryRefused, match="secondary cell suppression"):
        students.query(EE_MEN, "alice")
    decisions = [r["decision"] for r in students.log()]
    assert decisions == ["answered", "explained", "refused"]

    # oracles outside the guard: the pair pins Baker's income on the raw data (the
    # attack is real), and with the EE total alone released her interval is the LP's
    data = pd.read_csv(STUDENTS_CSV)
    ee = data[data.major == "EE"]
    assert ee.income.sum() - ee[ee.sex == "Male"].income.sum() == 50000
    ends = [linprog(c, A_eq=[[1, 1]], b_eq=[240000], bounds=[(0, None)] * 2).fun for c in ([1, 0], [-1, 0])]
    assert (baker.low, baker.high) == (ends[0], -ends[1])


def test_a_table_no_pattern_protects_is_explained_with_all_it_could_withhold(
    castro: Guard, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the suppression finds no pattern (made so here), the query is refused; its
    explanation withholds every cell that can be withheld, says so, and shows the
    sensitive cells' intervals under that pattern."""

    def infeasible(*_: object, **__: object) -> None:
        raise ProtectionInfeasible("no pattern")

    monkeypatch.setattr(decide, "suppress", infeasible)
    explained = castro.explain(CUBE, "alice")
    assert explained.methods == {"sum(salary)": "refused"}
    assert all(flags[-1] == "suppressed" for flags in explained.result.flags)
    assert explained.result.notes[-1].startswith("asked, refused by secondary cell suppression: no set")
    sensitive = [c for c in explained.cells if c.status.startswith("primary")]
    assert len(sensitive) == 3 and all(c.meets is True and not math.isnan(c.width) for c in sensitive)
    with pytest.raises(QueryRefused, match="no set of withheld cells protects"):
        castro.query(CUBE, "alice")
    assert [r["decision"] for r in castro.log()] == ["explained", "refused"]
