"""Bridge rows for the capacity-cut master: no withheld cell alone in a relation.

A withheld cell whose relation has every other cell published is *pinned*: the
relation gives its value, so every attacker deviation leaves it at zero (``d_i = 0``),
and publishing it changes no feasibility interval of any cell. Hence:

- a sensitive cell with a positive level is never alone in a relation of a protecting
  pattern (its interval would be a point): ``sum_{j in R, j != p} y_j >= 1`` for every
  relation ``R`` of ``p``, valid for **every** protecting pattern;
- any other withheld cell alone in a relation can be published at no loss, so under
  costs ``>= 0`` some optimal pattern has none: ``y_i <= sum_{j in R, j != i} y_j``,
  valid for **an optimal** pattern (not for every protecting one), which is all a
  master problem's optimum needs to stay a lower bound. Cells that must stay withheld
  (``forced``) get no row: they cannot be published.

The capacity cuts alone let the master choose cells that no deviation can use (its
8 x 8 x 8 patterns reached none of 58 levels, session 16); with these rows the offline
master proved the optimum of two of three 6 x 6 x 6 tables, in 1 and 6 minutes, where it
had proven none in 5, and the online loop reaches 8 x 8 x 8 patterns of 83/78/88 cells
where the local search alone stopped at 83/85/92 (``benchmarks/RESULTS.md``, session
17). These are Fischetti & Salazar's "bridgeless" inequalities in their simplest form.
"""

from __future__ import annotations

from collections.abc import Set

import numpy as np
from scipy import sparse

from guard.suppression.model import Levels
from guard.suppression.table import Table

__all__ = ["bridge_rows"]


def bridge_rows(
    table: Table, levels: Levels, forced: Set[int] = frozenset(), kept: Set[int] = frozenset()
) -> tuple[sparse.csr_matrix, np.ndarray]:
    """``(B, lower)``: the rows ``B y >= lower`` over the table's cells, one per
    relation and cell of it that may be withheld and published (sensitive cells with
    a positive level, or neither ``forced`` nor ``kept``)."""
    rows: list[int] = []
    cols: list[int] = []
    data: list[float] = []
    lower: list[float] = []
    protected = {p for p, lv in levels.items() if max(lv) > 0}
    for cells in table.relation_cells:
        for i in cells:
            if i in kept:
                continue  # published: its row would hold for any y
            if i in protected:
                rhs, own = 1.0, None
            elif i in forced or i in levels:
                continue  # withheld whatever the pattern: not to be published
            else:
                rhs, own = 0.0, -1.0
            r = len(lower)
            for j in cells:
                if j != i:
                    rows.append(r)
                    cols.append(j)
                    data.append(1.0)
            if own is not None:
                rows.append(r)
                cols.append(i)
                data.append(own)
            lower.append(rhs)
    shape = (len(lower), len(table))
    return sparse.csr_matrix((data, (rows, cols)), shape=shape), np.array(lower, dtype=np.float64)
