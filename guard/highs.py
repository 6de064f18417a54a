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

__all__ = ["LpResult", "LpSolver", "LpStatus", "lp_model", "solve_lp"]

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
    highs = _quiet()
    highs.passModel(
        _lp(
            (columns.indptr, columns.indices, columns.data, int(columns.shape[0])),
            cost,
            col_lower,
            col_upper,
            row_lower,
            row_upper,
        )
    )
    return highs


#: a column-wise matrix as its arrays: (indptr, indices, data, number of rows)
Columns = tuple[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any], int]


def _quiet() -> highspy.Highs:
    highs = highspy.Highs()  # type: ignore[no-untyped-call]  # highspy's stubs leave it untyped
    highs.setOptionValue("output_flag", False)
    return highs


def _lp(
    columns: Columns,
    cost: Vector,
    col_lower: Vector,
    col_upper: Vector,
    row_lower: Vector,
    row_upper: Vector,
) -> highspy.HighsLp:
    indptr, indices, data, rows = columns
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = len(indptr) - 1, rows
    lp.col_cost_ = np.asarray(cost, dtype=np.float64)
    lp.col_lower_ = np.asarray(col_lower, dtype=np.float64)
    lp.col_upper_ = np.asarray(col_upper, dtype=np.float64)
    lp.row_lower_ = np.asarray(row_lower, dtype=np.float64)
    lp.row_upper_ = np.asarray(row_upper, dtype=np.float64)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = indptr
    lp.a_matrix_.index_ = indices
    lp.a_matrix_.value_ = data.astype(np.float64, copy=False)
    return lp


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
    return _result(highs)


#: the largest count HiGHS's 32-bit integers hold (its ``kHighsIInf``)
_HIGHS_INT = (1 << 31) - 1
#: the enums ``LpSolver.solve`` passes as ints, converted once (each conversion through
#: pybind11 cost as much as a small array's)
_COLWISE = int(highspy.MatrixFormat.kColwise)
_MINIMIZE = int(highspy.ObjSense.kMinimize)


class LpSolver:
    """One HiGHS instance for a run of one-shot LPs (the heuristic solves thousands of
    small deviation LPs: a new instance each cost as much as the smaller ones' solve).
    Each model is passed afresh, which drops the last one's basis and solution, so every
    solve returns what :func:`solve_lp` returns for it (tested bit for bit). Not for
    sharing between threads."""

    def __init__(self, *, presolve: bool = True) -> None:
        """``presolve=False``: HiGHS's simplex from its start basis without presolve (see
        ``DeviationProblem.solver``); the same optimum value, possibly another optimal
        point."""
        self._highs = _quiet()
        if not presolve:
            self._highs.setOptionValue("presolve", "off")

    def solve(self, cost: Vector, columns: Columns, rhs: Vector, lower: Vector, upper: Vector) -> LpResult:
        """``min cost x  s.t.  A x = rhs,  lower <= x <= upper`` with ``A`` given by its
        column-wise arrays (no scipy matrix built)."""
        indptr, indices, data, rows = columns
        n = len(indptr) - 1
        if max(int(indptr[-1]), rows, n) > _HIGHS_INT:
            # HiGHS's integers are 32-bit: the int32 arrays below would wrap silently, a
            # count raises a TypeError; an LP that cannot be passed is one not solved
            # (FAILED: every caller withholds)
            empty = np.empty(0)
            return LpResult(LpStatus.FAILED, empty, empty, float("nan"))
        sides: npt.NDArray[np.float64] = np.asarray(rhs, dtype=np.float64)
        # the arrays straight to HiGHS (its C signature, every column continuous): the same
        # model as through a HighsLp (tested bit for bit), whose attributes copied each
        # array element by element (a third of a small LP's time)
        self._highs.passModel(
            n,
            rows,
            int(indptr[-1]),
            _COLWISE,
            _MINIMIZE,
            0.0,
            np.asarray(cost, dtype=np.float64),
            np.asarray(lower, dtype=np.float64),
            np.asarray(upper, dtype=np.float64),
            sides,
            sides,
            np.asarray(indptr, dtype=np.int32),
            np.asarray(indices, dtype=np.int32),
            np.asarray(data, dtype=np.float64),
            np.zeros(n, dtype=np.int32),
        )
        self._highs.run()
        return _result(self._highs)


def _result(highs: highspy.Highs) -> LpResult:
    status = highs.getModelStatus()
    if status == highspy.HighsModelStatus.kOptimal:
        solution = highs.getSolution()
        return LpResult(
            LpStatus.OPTIMAL,
            np.asarray(solution.col_value, dtype=np.float64),
            np.asarray(solution.row_dual, dtype=np.float64),
            # the info's field itself, without a copy of the whole info struct
            float(highs.getObjectiveValue()),
        )
    kind = LpStatus.INFEASIBLE if status == highspy.HighsModelStatus.kInfeasible else LpStatus.FAILED
    empty = np.empty(0)
    return LpResult(kind, empty, empty, float("nan"))
