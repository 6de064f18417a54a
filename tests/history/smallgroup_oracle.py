"""The group search as it was before session 16 (``guard/history/smallgroup.py`` at
e413081, with ``elimination.eliminated`` and ``reduced_echelon``): every node copied its matrix. Kept as the
oracle of ``test_smallgroup_oracle.py``: the in-place search must take the same steps,
spend the same nodes and return the same vector."""

# ruff: noqa
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from guard.history.modular import inverse_mod, mul_mod
from guard.history.steps import Ids, Residues
from guard.history.unitmatrix import UnitMatrix

__all__ = ["smallest_group"]

Mask = npt.NDArray[np.bool_]


def smallest_group(
    star: Residues, rest: Residues, units: UnitMatrix, k: int, p: int, budget: list[int]
) -> Residues | bool | None:
    """A vector v* + w (w in the row span of ``rest``) whose support touches fewer than k
    units of ``units`` (one row per coordinate); False when none; None when ``budget[0]``
    nodes did not settle it (the count is spent in place)."""
    if rest.shape[0]:
        reduced, pivots = reduced_echelon(rest, p)
    else:
        reduced, pivots = np.zeros((0, star.size), dtype=np.int64), np.zeros(0, dtype=np.int64)
    x = star % p
    for row, column in enumerate(pivots.tolist()):
        if x[column]:
            x = (x - mul_mod(reduced[row], int(x[column]), p)) % p
    # columns where V0 vanishes never change: their x is in every v (counted now) or zero
    moving = reduced.any(axis=0)
    counted = units.with_units(np.zeros(units.count, dtype=bool), np.flatnonzero(~moving & (x != 0)))
    budget[0] -= 1
    if int(counted.sum()) >= k:
        return False
    keep = np.flatnonzero(moving)
    where = np.full(star.size, -1, dtype=np.int64)
    where[keep] = np.arange(keep.size)
    search = _Search(units.restricted(keep), k, p, budget)
    alive = np.ones(keep.size, dtype=bool)
    found = search.branch(x[keep], reduced[:, keep], where[pivots], alive, counted)
    if not isinstance(found, np.ndarray):
        return found
    full = x.copy()
    full[keep] = found
    return full


class _Search:
    def __init__(self, units: UnitMatrix, k: int, p: int, budget: list[int]) -> None:
        self.units = units
        self.k = k
        self.p = p
        self.budget = budget
        #: no unit in two coordinates (one row per unit): disjoint supports have disjoint units
        self.disjoint = units.disjoint()

    def branch(
        self, x: Residues, reduced: Residues, pivots: Ids, alive: Mask, counted: Mask
    ) -> Residues | bool | None:
        """As ``smallest_group`` on x + span(reduced), ``counted`` units already in the
        group; ``alive``: the coordinates still tracked (a counted one is not)."""
        units, k = self.units, self.k
        while True:
            self.budget[0] -= 1
            if self.budget[0] < 0:
                return None
            vanishing = ~reduced.any(axis=0)
            forced = units.with_units(counted, np.flatnonzero(alive & vanishing & (x != 0)))
            known = int(forced.sum())
            if known >= k:
                return False
            cost = units.new_units(forced)
            open_ = alive & ~vanishing & (cost > 0)
            if not open_.any():
                return x  # every remaining freedom is free: x itself fits
            checks = self._packing(x, reduced, pivots, cost, forced, k - known)
            bound = sum(b for _, b, _ in checks)
            if known + bound >= k:
                return False
            # a coordinate in v adds its units to those of the checks it does not meet
            met = np.zeros(x.size, dtype=np.int64)
            if checks:
                marks = np.zeros((units.count, len(checks)), dtype=np.int64)
                for j, (_, _, check_units) in enumerate(checks):
                    marks[check_units, j] = 1
                hits = np.asarray(units.matrix @ marks) > 0
                met = np.asarray(hits @ np.array([b for _, b, _ in checks], dtype=np.int64), dtype=np.int64)
            full = np.flatnonzero(open_ & (cost + known + bound - met >= k))
            if not full.size:
                break
            for i in full.tolist():
                if reduced[:, i].any():
                    x, reduced, pivots = _eliminated(x, reduced, pivots, i, self.p)
                elif x[i]:
                    return False  # an earlier elimination fixed v there: the group reaches k
        pick = self._pick(open_, cost, checks)
        # 1. v is zero on ``pick``
        found = self.branch(*_eliminated(x, reduced, pivots, pick, self.p), alive, forced)
        if found is not False:
            return found
        # 2. ``pick`` is in the group: count its units and stop tracking it
        dropped = alive.copy()
        dropped[pick] = False
        return self.branch(x, reduced, pivots, dropped, units.with_units(forced, np.array([pick])))

    @staticmethod
    def _pick(open_: Mask, cost: npt.NDArray[np.int64], checks: list[tuple[Ids, int, Ids]]) -> int:
        """The cheapest open coordinate of the smallest check (v is nonzero on one of
        them, so the branch "zero here" shrinks that check), else the cheapest open one."""
        for support, _, _ in sorted(checks, key=lambda c: (c[0].size, -c[1])):
            inside = support[open_[support]]
            if inside.size:
                return int(inside[np.argmin(cost[inside])])
        choices = np.flatnonzero(open_)
        return int(choices[np.argmin(cost[choices])])

    def _packing(
        self,
        x: Residues,
        reduced: Residues,
        pivots: Ids,
        cost: npt.NDArray[np.int64],
        forced: Mask,
        need: int,
    ) -> list[tuple[Ids, int, Ids]]:
        """Checks with pairwise disjoint supports and new units, greedily (largest bound,
        then smallest support): (support, its cheapest coordinate's new units, its new
        units) each; stops once their bounds reach ``need``."""
        candidates = np.flatnonzero(x != 0)  # x is 0 on every pivot column
        if not candidates.size:
            return []
        on = reduced[:, candidates] != 0  # rows x checks: the pivots in each support
        cheapest = cost[candidates].copy()
        if pivots.size:
            through = np.where(on, cost[pivots][:, None], np.iinfo(np.int64).max).min(axis=0)
            cheapest = np.minimum(cheapest, through)
        useful = np.flatnonzero(cheapest > 0)
        if not useful.size:
            return []
        sizes = on[:, useful].sum(axis=0)
        order = useful[np.lexsort((sizes, -cheapest[useful]))]
        masks = _row_masks(on) if self.disjoint else None
        taken = 0
        used = np.zeros(x.size, dtype=bool)
        used_units = forced.copy()
        checks: list[tuple[Ids, int, Ids]] = []
        total = 0
        for o in order.tolist():
            if masks is not None and masks[o] & taken:
                continue  # shares a pivot (and so units) with a check taken
            support = np.concatenate([candidates[o : o + 1], pivots[on[:, o]]])
            new = self.units.units_of(support)
            new = new[~forced[new]]
            if masks is None:
                if used[support].any() or used_units[new].any():
                    continue
                used[support] = True
                used_units[new] = True
            else:
                taken |= masks[o]
            checks.append((support, int(cheapest[o]), new))
            total += int(cheapest[o])
            if total >= need:
                break
        return checks


def _row_masks(on: Mask) -> list[int]:
    """Per column of ``on``: its rows as one Python integer (disjointness by one AND)."""
    if not on.shape[0]:
        return [0] * on.shape[1]
    packed = np.packbits(on, axis=0)
    return [int.from_bytes(packed[:, j].tobytes(), "big") for j in range(on.shape[1])]


def _eliminated(
    x: Residues, reduced: Residues, pivots: Ids, pick: int, p: int
) -> tuple[Residues, Residues, Ids]:
    """x + span(reduced) restricted to the vectors zero on ``pick``, still reduced: the
    row pivoting ``pick`` out is zero on every other pivot column, so subtracting it keeps
    them, and its own pivot column becomes an ordinary one."""
    row = int(np.flatnonzero(reduced[:, pick])[0])
    zeroed, remaining = eliminated(x, reduced, pick, p)
    return zeroed, remaining, np.delete(pivots, row)


def eliminated(star: Residues, rest: Residues, pick: int, p: int) -> tuple[Residues, Residues]:
    """v* and V0 restricted to the vectors that are zero on ``pick`` (rest[:, pick] has a
    nonzero entry: the coordinate does not vanish)."""
    pivot_row = int(np.flatnonzero(rest[:, pick])[0])
    pivot = rest[pivot_row]
    inverse = inverse_mod(int(pivot[pick]), p)
    columns = np.flatnonzero(pivot)
    zeroed_star = star.copy()
    if star[pick]:
        factor = int(star[pick]) * inverse % p
        zeroed_star[columns] = (star[columns] - mul_mod(pivot[columns], factor, p)) % p
    remaining = np.delete(rest, pivot_row, axis=0)
    # only the rows nonzero on ``pick`` change, and only where the pivot row is nonzero
    # (the rows are sparse: updating the whole matrix cost most of a deep search)
    changing = np.flatnonzero(remaining[:, pick])
    if changing.size:
        factors = mul_mod(remaining[changing, pick], inverse, p)
        block = np.ix_(changing, columns)
        remaining[block] = (remaining[block] - mul_mod(factors[:, None], pivot[columns][None, :], p)) % p
    return zeroed_star, remaining


def reduced_echelon(matrix: Residues, p: int) -> tuple[Residues, Ids]:
    """(R, pivots): the nonzero rows of ``matrix``'s reduced row echelon form mod p, and
    the pivot column of each (its entry 1, every other row 0 there)."""
    rows = matrix % p
    m, columns = rows.shape
    pivots: list[int] = []
    top = 0
    for column in range(columns):
        if top == m:
            break
        candidates = np.flatnonzero(rows[top:, column])
        if not candidates.size:
            continue
        chosen = int(candidates[0]) + top
        if chosen != top:
            rows[[top, chosen]] = rows[[chosen, top]]
        rows[top] = mul_mod(rows[top], inverse_mod(int(rows[top, column]), p), p)
        others = np.flatnonzero(rows[:, column])
        others = others[others != top]
        if others.size:
            factors = rows[others, column][:, None]
            rows[others] = (rows[others] - mul_mod(factors, rows[top][None, :], p)) % p
        pivots.append(column)
        top += 1
    return rows[:top].copy(), np.asarray(pivots, dtype=np.int64)
