"""HiGHS models, built one way for every LP and MILP of the guard (the history audit's
sums, the suppression's deviations and cuts), through highspy directly.

scipy's ``linprog(method="highs")`` solves the same model but spends about as long again
in Python on each call as HiGHS spends solving it (checking and copying the input, and
building the bound marginals nobody here reads): measured 7.4 ms of wrapper and 6.9 ms
of solve per deviation LP of bench_core's q13. The suppression solves hundreds of small
LPs per answer, so the wrapper was half of it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from enum import Enum
from typing import Any

import highspy
import numpy as np
import numpy.typing as npt
from scipy import sparse

__all__ = ["LpResult", "LpStatus", "lp_model", "solve_lp"]

Vector = npt.NDArray[np.floating[Any]]


def _first_highs() -> None:
    """HiGHS prints a banner on the C stdout when its first model is made, whatever the
    options: make that one at import, with stdout pointed at /dev/null, so no answer
    (``guard query`` writes answers to stdout) ever carries it."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):  # no stdout to protect (a daemon's closed fd 1)
        highspy.Highs()  # type: ignore[no-untyped-call]
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            highspy.Highs()  # type: ignore[no-untyped-call]
    finally:
        os.dup2(saved, 1)
        os.close(saved)


_first_highs()


def lp_model(
    matrix: sparse.spmatrix | sparse.sparray,
    cost: Vector,
    col_lower: Vector,
    col_upper: Vector,
    row_lower: Vector,
    row_upper: Vector,
) -> highspy.Highs:
    """A quiet HiGHS model: ``min cost x`` with ``row_lower <= matrix x <= row_upper`` and
    ``col_lower <= x <= col_upper`` (infinite bounds as ``±inf``)."""
    columns = sparse.csc_matrix(matrix)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = int(columns.shape[1]), int(columns.shape[0])
    lp.col_cost_ = np.asarray(cost, dtype=np.float64)
    lp.col_lower_ = np.asarray(col_lower, dtype=np.float64)
    lp.col_upper_ = np.asarray(col_upper, dtype=np.float64)
    lp.row_lower_ = np.asarray(row_lower, dtype=np.float64)
    lp.row_upper_ = np.asarray(row_upper, dtype=np.float64)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = columns.indptr
    lp.a_matrix_.index_ = columns.indices
    lp.a_matrix_.value_ = columns.data.astype(np.float64, copy=False)
    highs = highspy.Highs()  # type: ignore[no-untyped-call]  # highspy's stubs leave it untyped
    highs.setOptionValue("output_flag", False)
    highs.passModel(lp)
    return highs


class LpStatus(Enum):
    OPTIMAL = "optimal"
    INFEASIBLE = "infeasible"
    #: unbounded, out of time or iterations, or a numerical failure: no answer
    FAILED = "failed"


@dataclass(frozen=True)
class LpResult:
    status: LpStatus
    #: the optimal point and objective, the duals of the rows (scipy's ``eqlin.marginals``
    #: sign); empty / nan unless OPTIMAL
    x: npt.NDArray[np.float64]
    row_duals: npt.NDArray[np.float64]
    objective: float


def solve_lp(
    cost: Vector,
    matrix: sparse.spmatrix | sparse.sparray,
    rhs: Vector,
    lower: Vector,
    upper: Vector,
) -> LpResult:
    """``min cost x  s.t.  matrix x = rhs,  lower <= x <= upper``, once."""
    highs = lp_model(matrix, cost, lower, upper, rhs, rhs)
    highs.run()
    status = highs.getModelStatus()
    if status == highspy.HighsModelStatus.kOptimal:
        solution = highs.getSolution()
        return LpResult(
            LpStatus.OPTIMAL,
            np.asarray(solution.col_value, dtype=np.float64),
            np.asarray(solution.row_dual, dtype=np.float64),
            float(highs.getInfo().objective_function_value),
        )
    kind = LpStatus.INFEASIBLE if status == highspy.HighsModelStatus.kInfeasible else LpStatus.FAILED
    empty = np.empty(0)
    return LpResult(kind, empty, empty, float("nan"))
