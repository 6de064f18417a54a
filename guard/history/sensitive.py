"""Sensitive sets for the history audit: the finest cells the policy's rules flag.

Magnitude rules (dominance, p%, pq) protect *sets of rows*, not the cells someone asked
for: a dominated cell must not be recovered as the difference of released totals (for
example a margin minus the same margin over ``profession <> 'P5'``), asked or not. The
guard judges every finest cell of a table (grouped by every dimension) with the rules,
as it judges any answer's cells; the group search (``groups.py``) then treats any
nonzero combination of released answers supported inside one such cell as a disclosure,
like a group of fewer than k respondents.

Beyond exact recovery, ``protects_sensitive_sets`` keeps each such cell's feasibility
interval (an LP over every released SUM and the declared bounds) as wide as the rule's
protection levels, which hold against the largest contributor or the coalition.

These decisions read the data's values (the rules are value-based by definition), so a
refusal they cause can tell that some cell is sensitive; it tells no more than the
cell suppression of an answer that groups by every dimension already does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap

from guard.arrays import distinct
from guard.history.atomlp import AtomIntervals, atoms_of
from guard.history.atomproof import Part, affordable, prove, shares
from guard.history.carry import PointCarry, carried
from guard.history.finest import FinestCells
from guard.history.keys import normalized
from guard.history.rowsets import as_row_ids
from guard.history.universe import AuditCells, Universe
from guard.query.shape import QueryShape

__all__ = [
    "FinestSensitivity",
    "SensitiveSets",
    "certified_sets",
    "interval_targets",
    "protects_sensitive_sets",
    "sensitive_sets",
]

Ids = npt.NDArray[np.int64]

#: the shape grouping a table by every dimension; per magnitude space the cells the rules
#: flag: group key (dimension values, in the shape's order), the cell's total, and its
#: (lower, upper) protection levels; and per space every finest cell's total, by group key
FinestSensitivity = tuple[
    QueryShape,
    dict[str, list[tuple[tuple[Any, ...], float, tuple[float, float]]]],
    dict[str, dict[tuple[Any, ...], float]],
]


@dataclass(frozen=True, eq=False)
class SensitiveSets:
    """``of[i]``: the sensitive set audit row id i lies in, or -1; per set its audit row
    ids, true total and (lower, upper) protection levels."""

    of: npt.NDArray[np.int64]
    members: tuple[npt.NDArray[np.int64], ...]
    totals: tuple[float, ...]
    levels: tuple[tuple[float, float], ...]
    #: per audit row id: its true total of the measure (NaN where unknown: a finest cell
    #: split into several pieces across data versions, or rows of earlier versions)
    values: npt.NDArray[np.float64]


def sensitive_sets(
    sensitivity: FinestSensitivity | None, finest: FinestCells, rows: Universe, space: str
) -> SensitiveSets | None:
    """The sensitive sets of one audit state (None: there are none)."""
    if sensitivity is None:
        return None
    shape, flagged, sums = sensitivity
    cells_flagged = flagged.get(space)
    if not cells_flagged or not space.startswith("sum("):
        return None
    measure = space[4:-1]
    (cells,) = finest.query_sets(shape, [(space, measure, frozenset({0}))])
    level = tuple(shape.group_by)
    found = np.full(rows.cells.count, -1, dtype=np.int64)
    members: list[npt.NDArray[np.int64]] = []
    totals: list[float] = []
    levels: list[tuple[float, float]] = []
    for values, total, level_pair in cells_flagged:
        ids = cells.cells.get((level, tuple(normalized(v) for v in values)))
        audit_ids = None if ids is None or not ids.size else rows.ids(finest.data_version, ids)
        if audit_ids is None or not audit_ids.size:
            continue
        found[audit_ids] = len(members)
        members.append(audit_ids)
        totals.append(total)
        levels.append(level_pair)
    if not members:
        return None
    true = np.full(rows.cells.count, np.nan)
    for key, total in sums.get(space, {}).items():
        ids = cells.cells.get((level, tuple(normalized(v) for v in key)))
        audit_ids = None if ids is None or not ids.size else rows.ids(finest.data_version, ids)
        if audit_ids is not None and audit_ids.size == 1:
            true[int(audit_ids[0])] = total
    return SensitiveSets(found, tuple(members), tuple(totals), tuple(levels), true)


def protects_sensitive_sets(
    sets: SensitiveSets,
    cells: AuditCells,
    released: Sequence[BitMap],
    values: Sequence[float | None],
    candidate: npt.NDArray[np.int64],
    value: float,
    bounds: tuple[float, float],
    carry: PointCarry | None = None,
) -> bool:
    """With the candidate SUM released, does every sensitive set keep a feasibility
    interval that reaches its protection levels (max >= total + upper, min <= total -
    lower), given every released SUM and the declared bounds? Every set within the
    candidate's reach is checked (the released sets connected to it through shared rows;
    the others' intervals cannot change): by the true values' certificate, then by
    feasible points and exact LPs in the atom model (``atomlp.py``), whose answer is the
    row LP's (``intervals.feasible_interval``). A set already short of its levels before
    is not the candidate's doing when its interval does not move. A set past the LP
    budgets (``MAX_ATOM_INTERVALS``, ``MAX_SPLIT_INTERVALS``), or whose LP fails, makes
    the answer False (withhold).

    The protection levels encode the insider (the largest contributor, or the coalition,
    as each rule defines), as in the suppression's interval audit. This check reads
    released values and the candidate's true value: its refusals are value-based, as the
    rules themselves are. ``carry``: the audit state's points of its last check, reused
    where they stay feasible (``carry.py``), and replaced by this check's."""
    fresh = BitMap(candidate.tolist())
    reach, positions = BitMap(fresh), []
    remaining = [i for i, v in enumerate(values) if v is not None]
    grown = True
    while grown:
        grown = False
        for i in list(remaining):
            if released[i].intersect(reach):
                reach |= released[i]
                positions.append(i)
                remaining.remove(i)
                grown = True
    linked = [(released[i], float(values[i] or 0.0)) for i in positions]
    reach_ids = as_row_ids(reach)
    near = distinct(sets.of[reach_ids])
    near = near[near >= 0]
    after = [*linked, (fresh, value)]
    if near.size:
        atoms = atoms_of(after, reach_ids, sets.values.size)
        near = near[~certified_sets(sets, cells, after, reach_ids, near, bounds, atoms)]
        if near.size:
            lifted = None
            if carry is not None:
                counts = cells.row_counts()
                lifted = carry.lift(
                    released, values, positions, candidate, value, reach_ids, atoms[1], counts, bounds
                )
            proven, short, points = _atom_proven(sets, cells, after, reach_ids, near, bounds, atoms, lifted)
            if carry is not None:
                size = sets.values.size
                carry.keep(
                    carried(atoms[1], reach_ids, size, points, positions, candidate, value, len(released))
                )
            near = near[~proven]
            if short:
                # exactly short: acceptable only where the candidate moved nothing
                near = near[~np.isin(near, _unmoved(sets, cells, linked, short, bounds))]
                if np.isin(near, list(short)).any():
                    return False
    # what no point, atom or split LP settled (past a budget, or a failed solve) is not
    # vouched for: withhold
    return not near.size


def certified_sets(
    sets: SensitiveSets,
    cells: AuditCells,
    after: Sequence[tuple[BitMap, float]],
    reach: npt.NDArray[np.int64],
    near: npt.NDArray[np.int64],
    bounds: tuple[float, float],
    atoms: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None,
) -> npt.NDArray[np.bool_]:
    """Per set of ``near``: whether a feasible point proves its interval wide enough, so
    that no LP is needed (most sets, on tables of many dimensions, where nearly every
    finest cell is flagged and an LP each is out of reach).

    The point: rows with the same membership in every released set (an atom of the
    reach) can trade value without changing any released SUM. Starting from the true
    values, move the set's share of each atom to its bound (the atom's other rows take
    up the difference, within theirs): every released SUM holds, so the set's total
    there is inside its feasible interval, and the interval reaches at least as far.
    Sets touching an atom with a row of unknown true value are left to the LP."""
    low_bound, high_bound = bounds
    slot, atom = atoms if atoms is not None else atoms_of(after, reach, sets.values.size)
    every_count = cells.row_counts()
    counts = every_count[reach].astype(np.float64)
    true = sets.values[reach]
    atom_count = int(atom.max()) + 1 if atom.size else 0
    atom_total = np.bincount(atom, weights=np.nan_to_num(true), minlength=atom_count)
    atom_unknown = np.bincount(atom, weights=np.isnan(true).astype(np.float64), minlength=atom_count) > 0
    atom_rows = np.bincount(atom, weights=counts, minlength=atom_count)
    out = np.zeros(near.size, dtype=bool)
    for i, number in enumerate(near.tolist()):
        members = sets.members[number]
        inside = slot[members]
        outside_reach = members[inside < 0]  # in no released set: free within its box
        inside = inside[inside >= 0]
        own_atoms, own_slots = np.unique(atom[inside], return_inverse=True)
        if atom_unknown[own_atoms].any():
            continue
        own_rows = np.bincount(own_slots.reshape(-1), weights=counts[inside], minlength=own_atoms.size)
        rest_rows = atom_rows[own_atoms] - own_rows
        totals = atom_total[own_atoms]
        free = float(every_count[outside_reach].sum())
        high = float(np.minimum(high_bound * own_rows, totals - low_bound * rest_rows).sum())
        low = float(np.maximum(low_bound * own_rows, totals - high_bound * rest_rows).sum())
        high += high_bound * free
        low += low_bound * free
        out[i] = _reaches(sets, cells, number, (low, high), bounds)
    return out


def _atom_proven(
    sets: SensitiveSets,
    cells: AuditCells,
    after: Sequence[tuple[BitMap, float]],
    reach: npt.NDArray[np.int64],
    near: npt.NDArray[np.int64],
    bounds: tuple[float, float],
    atoms: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]],
    lifted: npt.NDArray[np.float64] | None = None,
) -> tuple[npt.NDArray[np.bool_], dict[int, tuple[float, float]], npt.NDArray[np.float64]]:
    """Per set of ``near``: whether it reaches its targets in the atom model
    (``atomproof.py``); the exact intervals of the sets that fall short (by set number);
    and every feasible point found, for the next check. ``atoms``: (slot, atom) of
    ``atomlp.atoms_of``, shared with the certificate; ``lifted``: points carried from the
    last check (used only where feasible here)."""
    slot, atom = atoms
    counts = cells.row_counts()
    intervals = AtomIntervals(after, slot, atom, counts[reach].astype(np.float64), bounds)
    parts = []
    for number in near.tolist():
        need_low, need_high = interval_targets(sets, cells, number, bounds)
        slack = 1e-6 * max(1.0, abs(sets.totals[number]))
        own, share, free = shares(sets.members[number], slot, atom, counts)
        parts.append(Part(own, share, free, need_low + slack, need_high - slack))
    if lifted is not None:
        intervals.add_points(lifted)
    proven, short = prove(intervals, parts, bounds)
    by_set = {int(near[j]): interval for j, interval in short.items()}
    return proven, by_set, intervals.points()


def _unmoved(
    sets: SensitiveSets,
    cells: AuditCells,
    linked: Sequence[tuple[BitMap, float]],
    short: dict[int, tuple[float, float]],
    bounds: tuple[float, float],
) -> list[int]:
    """The sets of ``short`` (exact intervals with the candidate, short of their targets)
    whose exact interval without the candidate is the same: already short before, so not
    the candidate's doing. Computed in the atom model of the earlier releases alone."""
    if not linked or not short:
        return []
    reach = as_row_ids(BitMap.union(*(members for members, _ in linked)))
    slot, atom = atoms_of(linked, reach, sets.values.size)
    counts = cells.row_counts()
    intervals = AtomIntervals(linked, slot, atom, counts[reach].astype(np.float64), bounds)
    unmoved = []
    for number, (low, high) in short.items():
        own, share, free = shares(sets.members[number], slot, atom, counts)
        if not affordable(intervals, own):
            break
        before_low, before_high = intervals.exact(own, share)
        if before_low is None or before_high is None:
            continue
        slack = 1e-6 * max(1.0, abs(sets.totals[number]))
        if (
            abs(before_low + bounds[0] * free - low) <= slack
            and abs(before_high + bounds[1] * free - high) <= slack
        ):
            unmoved.append(number)
    return unmoved


def _reaches(
    sets: SensitiveSets,
    cells: AuditCells,
    number: int,
    interval: tuple[float, float],
    bounds: tuple[float, float],
) -> bool:
    """Whether ``interval`` (values set ``number``'s total is known to reach, down and up)
    spans its targets, within LP round-off."""
    need_low, need_high = interval_targets(sets, cells, number, bounds)
    slack = 1e-6 * max(1.0, abs(sets.totals[number]))
    return interval[1] >= need_high - slack and interval[0] <= need_low + slack


def interval_targets(
    sets: SensitiveSets, cells: AuditCells, number: int, bounds: tuple[float, float]
) -> tuple[float, float]:
    """How far set ``number``'s interval must reach down and up: its protection levels
    from its true total, but never past what the declared bounds allow before anything
    is released (rows x [lo, hi]); a level the bounds themselves deny cannot be the
    answers' doing, and demanding it would refuse every SUM over the set."""
    total = sets.totals[number]
    low_level, high_level = sets.levels[number]
    rows = cells.rows(sets.members[number])
    return max(total - low_level, bounds[0] * rows), min(total + high_level, bounds[1] * rows)
