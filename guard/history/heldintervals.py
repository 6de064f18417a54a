"""Feasibility intervals of the values the history audit would withhold (``guard explain``).

The history audit withholds a value whose release, with what the analyst's audit scope
released before, would determine a group of fewer than k units (or pin a sensitive
finest cell): the value itself is not determined by those releases, else it would be
implied and released. What they leave of it is what a steward wants to see: [min, max]
of its query set's total subject to every total released into the same audit state
(before, in order, and by this answer), each audit row within its box:

- a SUM (an AVG is audited as its SUM): the row's rows times the measure's declared
  bounds, as in the sensitive-set check (``atomlp.py``): with the true row counts, so
  tighter than what an analyst can derive (the interval errs towards looking exposed);
- a COUNT: the rows are what is unknown, so each audit row holds 0 .. N rows (N the
  table's) and a released count is the number of rows of its set.

The LP is over the atoms of the released sets and the withheld values' sets
(``atomlp.AtomIntervals``: one model per audit state, each value's total a sum of whole
atoms, two solves per value that change only the objective). Released sets the audit cannot place
(released before data versions were tracked) and SUMs released without their value are
left out, which can only widen an interval. At most :data:`MAX_HELD_INTERVALS` values of
one explanation are bounded, within :data:`MAX_INTERVAL_SECONDS` of solving (an audit
state with thousands of releases makes an LP of thousands of rows and tens of thousands
of atoms: q18 of bench_core at 100k rows, 2,854 x 16,223, 0.1-0.8 s a value); the
others, and any value whose LP fails, are shown without an interval (NaN), never with a
guessed one. The sets are read under the release lock, the LPs solved after it
(``Preview.held``): an explanation does not hold analysts' answers back for its LPs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from guard.history.atomlp import AtomIntervals, atoms_of
from guard.history.keys import COUNT_SPACE
from guard.history.rowsets import as_bitmap
from guard.history.universe import Universe

__all__ = [
    "MAX_HELD_INTERVALS",
    "MAX_INTERVAL_SECONDS",
    "HeldSet",
    "SpaceProblem",
    "explained_intervals",
    "held_intervals",
    "problem",
]

Ids = npt.NDArray[np.int64]

#: values of one explanation whose interval is computed (two LP solves each over every
#: release of their audit state)
MAX_HELD_INTERVALS = 200
#: seconds one explanation may spend solving those LPs, after the release lock (only the
#: steward waits: at 1M rows one value of a state of 8,000 releases needed 14.5 s)
MAX_INTERVAL_SECONDS = 30.0

#: (data version, finest-cell bitmap, released SUM or None), as ``StateStore.audit_sets``
Released = tuple[str, bytes, float | None]


@dataclass(frozen=True)
class HeldSet:
    """A withheld value's query set: its audit state's space and the audit's row ids."""

    space: str
    ids: Ids


@dataclass(frozen=True)
class SpaceProblem:
    """What one audit state's LP needs, read under the release lock (:func:`problem`) and
    solved after it (:func:`explained_intervals`): the released sets as audit row ids
    with their totals, in order, the rows of every audit row, the per-row bounds."""

    counting: bool
    sets: tuple[tuple[Ids, float], ...]
    counts: npt.NDArray[np.float64]
    bounds: tuple[float, float] | None


def problem(
    rows: Universe, space: str, released: Sequence[Released], bounds: tuple[float, float] | None
) -> SpaceProblem:
    """The LP of one audit state (``space``) given what was ``released`` into it.
    ``bounds``: the measure's declared per-row bounds (a ``sum(m)`` space; None for a
    count, or a measure without declared bounds, whose values are then not bounded)."""
    counting = space == COUNT_SPACE
    counts = rows.cells.row_counts().astype(np.float64)  # a copy: read after the lock
    if bounds is None and not counting:
        return SpaceProblem(counting, (), counts, None)
    sets = tuple(_placed(rows, released, counts if counting else None))
    # a COUNT's unknowns are the rows themselves: one per audit row, 0 .. N each
    box = (0.0, float(counts.sum())) if counting else bounds
    return SpaceProblem(counting, sets, counts, box)


def held_intervals(
    problem: SpaceProblem, targets: Sequence[Ids], deadline: float = math.inf
) -> list[tuple[float, float]]:
    """[min, max] of each target's total (audit row ids) in one audit state (module
    docstring); (NaN, NaN) where it is not computed. ``deadline``
    (``time.monotonic()``): no solve runs past it."""
    nan = (math.nan, math.nan)
    if not targets or problem.bounds is None or time.monotonic() >= deadline:
        return [nan] * len(targets)
    sets = problem.sets
    reach = np.unique(np.concatenate([*(ids for ids, _ in sets), *targets]))
    members = [(as_bitmap(ids), value) for ids, value in sets]
    # the atoms of the released sets and the targets together: each target is whole
    # atoms, so its bounds change only the objective (no equation: the targets were not
    # released), and each solve starts from the last one's basis
    apart = [(as_bitmap(ids), 0.0) for ids in targets]
    slot, atom = atoms_of([*members, *apart], reach, problem.counts.size)
    weights = np.ones(reach.size) if problem.counting else problem.counts[reach]
    model = AtomIntervals(members, slot, atom, weights, problem.bounds)
    out = []
    for ids in targets:
        left = deadline - time.monotonic()
        if left <= 0:
            out.append(nan)
            continue
        model.limit(min(left, 1e6))
        low, high = model.whole(np.unique(atom[slot[ids]]))
        out.append(nan if low is None or high is None else (low, high))
    return out


def explained_intervals(
    problems: Mapping[str, SpaceProblem], held: Sequence[HeldSet | None]
) -> list[tuple[float, float]]:
    """The interval of each held value (None: its rows are not known), by audit state,
    the first :data:`MAX_HELD_INTERVALS` values only, within :data:`MAX_INTERVAL_SECONDS`;
    the same query set is bounded once. Call it outside the release lock."""
    deadline = time.monotonic() + MAX_INTERVAL_SECONDS
    out = [(math.nan, math.nan)] * len(held)
    chosen = [i for i, h in enumerate(held) if h is not None][:MAX_HELD_INTERVALS]
    for space in sorted({held[i].space for i in chosen}):  # type: ignore[union-attr]
        distinct: dict[bytes, Ids] = {}
        places: list[tuple[int, bytes]] = []
        for i in chosen:
            target = held[i]
            assert target is not None
            if target.space == space:
                key = target.ids.tobytes()
                distinct.setdefault(key, target.ids)
                places.append((i, key))
        keys = list(distinct)
        try:
            found = held_intervals(problems[space], [distinct[k] for k in keys], deadline)
        except Exception:  # shown only, nothing released depends on it: unbounded, not guessed
            found = [(math.nan, math.nan)] * len(keys)
        by_key = dict(zip(keys, found, strict=True))
        for i, key in places:
            out[i] = by_key[key]
    return out


def _placed(
    rows: Universe, released: Sequence[Released], counts: npt.NDArray[np.float64] | None
) -> list[tuple[Ids, float]]:
    """Each released set as audit row ids and its total (a count: its rows), in order;
    sets the audit cannot place, and SUMs without a value, left out."""
    out = []
    for version, cells, value in released:
        ids = rows.stored(version, cells)
        if ids is None or ids.size == 0:
            continue
        total = float(counts[ids].sum()) if counts is not None else value
        if total is not None and math.isfinite(total):
            out.append((ids, total))
    return out
