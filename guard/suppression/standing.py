"""Requirements that stand whatever else is published: proofs at the least pattern.

A linked answer is protected together with cells nobody released: the common
refinement of the released patterns, whose sensitive cells are requirements too (a
released cell could narrow them: a respondent-level disclosure). Most of them are far
from any cell the new answer could publish, and their intervals stay wide whatever it
publishes. Solving the pattern with every one of them as a requirement costs an LP per
cell and direction in the heuristic and again per insider: minutes on a 1,000-cell view.

Every pattern :func:`~guard.suppression.suppress` can return withholds at least the
*least pattern*: the cells that must be withheld anyway (withheld earlier, never
released, sensitive). A deviation ``d`` (``A d = 0``, within the bounds) that moves
only cells of the least pattern is a feasible point of the attacker's LP for every
pattern that withholds more (seed 004, Def. 2; :mod:`~guard.suppression.certificates`).
So a requirement proven at the least pattern needs no place in the problem that chooses
the complementary cells: whatever the answer publishes, its interval reaches its levels.

Insiders (:mod:`~guard.suppression.insiders`): the sole contributor of a withheld
single-contributor cell knows it. A deviation that leaves her cells in place is one she
cannot rule out either; a requirement counts as standing only when, for every such
insider but its own contributor, some deviation proves both of its levels without
moving her cells. Each direction is proven first by the smallest deviation
(:mod:`~guard.suppression.smallest`: least total move, so few cells), which holds
against every insider it leaves in place; only the insiders it moves need another,
one that avoids them all; when none does, they are split in halves, down to single
insiders.

The first LPs push many requirements at once (every insider fixed: a feasibility LP
over the whole table, kept across rounds); the rest are the smallest-deviation LPs,
each a few hundred dual simplex steps from the "move nothing" basis. Both are
budgeted by counts, not the clock (:data:`MAX_WORK`, :data:`MAX_PIVOT_WORK`), so what
is proven does not depend on the machine's load. A requirement not proven within the
budget, or that no deviation moves far enough, is simply not standing: it stays a
requirement of the pattern (fail closed), whose own proofs and audits then decide.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import highspy
import numpy as np

from guard.highs import lp_model
from guard.suppression.certificates import Certificates
from guard.suppression.insiders import MAX_PIVOT_WORK, InsiderProver, same_unit
from guard.suppression.model import Levels, ProtectionLevels, required_levels
from guard.suppression.smallest import SmallestDeviation
from guard.suppression.table import Key, Table

__all__ = ["MAX_WORK", "MIN_SOLVES", "Standing", "prove_standing"]

#: pushes (feasibility LPs over the whole table) one call may solve, times the square
#: of the table's cells (one costs about 2 ms on a 1,400-cell view, 35 ms on 6,000
#: cells, 150 ms on 15,000)
MAX_WORK = 4_000_000_000
#: LPs always allowed, however large the table
MIN_SOLVES = 20
#: rounds of pushing every requirement at once, and the least share of a round's
#: targets it must prove for another round to run
_PUSH_ROUNDS = 12
_PUSH_GAIN = 0.02


@dataclass(frozen=True)
class Standing:
    """What :func:`prove_standing` proved.

    Attributes:
        proven: the requirements whose levels every pattern withholding the least
            pattern keeps, against outsiders and every single-contributor insider.
        deviations: the verified deviations behind them (cell indices, sorted; their
            moves), each moving cells of the least pattern only. Internal: they hold
            hidden values' room, never show them.
        solved: LPs solved (pushes and smallest deviations).
    """

    proven: frozenset[Key]
    deviations: tuple[tuple[np.ndarray, np.ndarray], ...] = field(default=(), repr=False)
    solved: int = 0

    def proofs(self, table: Table) -> tuple[Mapping[Key, float], ...]:
        """The deviations by cell key of ``table`` (the one proven on), for
        ``suppress(prior=...)``, which checks them again."""
        keys = table.keys  # looked up in C: a proof may move thousands of cells
        return tuple(
            dict(zip(map(keys.__getitem__, cells.tolist()), moves.tolist(), strict=True))
            for cells, moves in self.deviations
        )


def prove_standing(
    table: Table,
    requirements: Mapping[Key, ProtectionLevels],
    hidden: Iterable[Key],
    singletons: Iterable[Key] = (),
    *,
    max_solves: int | None = None,
    max_open: int | None = None,
    prior: Iterable[Mapping[Key, float]] = (),
) -> Standing:
    """The ``requirements`` proven at the least pattern ``hidden`` (plus the required
    cells themselves, which every pattern withholds).

    Args:
        table: the cells, bounds and relations of the whole problem.
        requirements: sensitive cells and their levels, each to be proven or left.
        hidden: the cells every pattern withholds (earlier withheld, never released,
            sensitive cells of the answer).
        singletons: cells with a single contributor (see
            :mod:`~guard.suppression.singletons`); a proof must hold against each.
        max_solves: most LPs to solve; None: as many as the budgets allow (pushes:
            :data:`MAX_WORK` over the square of the table's cells, at least
            :data:`MIN_SOLVES`; smallest deviations: :data:`MAX_PIVOT_WORK`).
        max_open: stop once more requirements than this are left unproven (the
            caller will not solve a pattern for so many); None: try every one.
        prior: deviations found for earlier answers over these cells (by key); each
            that is still a deviation moving only the least pattern proves without an
            LP (checked exactly, :meth:`Certificates.adopt`).

    Raises:
        ValueError: a key is unknown or a level negative.
    """
    levels = required_levels(table, requirements)
    pushes = max(MIN_SOLVES, MAX_WORK // max(1, len(table)) ** 2)
    if max_solves is not None:
        pushes = min(pushes, max_solves)
    least = frozenset(table.index(k) for k in hidden) | frozenset(levels)
    # a published singleton is known to everyone already: only withheld ones are secrets
    single = frozenset(table.index(k) for k in singletons) & least
    group = same_unit(table, single)
    insiders = sorted({group[c] for c in single}, key=min)
    certificates = Certificates(table, watch=single)
    # a linked answer's view is mostly the last one's: its proofs mostly still hold
    certificates.adopt(table, prior, least)
    lp = _Feasibility(table, least)
    _push_together(lp, certificates, levels, single, pushes)
    smallest = SmallestDeviation(table, least)
    solves = None if max_solves is None else max_solves - lp.solved
    prover = InsiderProver(table, smallest, certificates, solves, MAX_PIVOT_WORK // max(1, len(table)))
    proven: set[int] = set()
    left = 0
    for p in sorted(levels, key=lambda p: (-max(levels[p]), p)):
        own = group.get(p, frozenset({p}))
        if prover.proven(p, levels[p], [g for g in insiders if g != own]):
            proven.add(p)
        else:
            left += 1
            if max_open is not None and left > max_open:
                break
    return Standing(
        frozenset(table.keys[p] for p in proven),
        tuple(certificates.deviations()),
        lp.solved + smallest.solved,
    )


def _push_together(
    lp: _Feasibility, certificates: Certificates, levels: Levels, single: frozenset[int], budget: int
) -> None:
    """Deviations that move many requirements by their levels at once, every insider's
    cells fixed (so each proves against all of them): each round pushes every
    requirement not yet proven one way, to its level, and keeps the point. Rounds stop
    when one proves nothing new. Requirements with a single contributor are left to
    their own LPs (a point moving several of them proves none against the others)."""
    pending = {p: lv for p, lv in levels.items() if p not in single}
    flip = False
    rounds = 0
    while pending and lp.solved < budget:
        targets: dict[int, float] = {}
        for p, (upper, lower) in list(pending.items()):
            up = upper > 0 and not certificates.covers(p, upper, True, avoid=single)
            down = lower > 0 and not certificates.covers(p, lower, False, avoid=single)
            if not (up or down):
                del pending[p]
            elif up and down:
                # alternate the direction of the cells that need both, so that a margin's
                # members are not all pushed the same way round after round
                targets[p] = upper if (p % 2 == 0) != flip else -lower
            else:
                targets[p] = upper if up else -lower
        flip = not flip
        if not targets:
            return
        deviation = lp.push(targets, single)
        if deviation is None:
            return
        support = np.flatnonzero(deviation)
        certificates.add(support, deviation[support], lp.movable(single))
        reached = sum(certificates.covers(p, abs(t), t > 0, avoid=single) for p, t in targets.items())
        rounds += 1
        if reached < _PUSH_GAIN * len(targets) or rounds >= _PUSH_ROUNDS:
            # each round costs an LP over every cell: the rest is left to one LP each
            return


class _Feasibility:
    """``A d = 0``, ``lb - a <= d <= ub - a`` on the movable cells (0 elsewhere), some
    cells pushed towards their moves: one HiGHS model over the whole table kept across
    pushes (each starts from the last basis)."""

    def __init__(self, table: Table, least: frozenset[int]) -> None:
        a, lb, ub = table.arrays
        self._room = (lb - a, ub - a)
        matrix = table.matrix.tocsc()
        n, m = matrix.shape[1], matrix.shape[0]
        self._least = np.zeros(n, dtype=bool)
        self._least[list(least)] = True
        self._least_cells = frozenset(int(i) for i in least)  # asked per LP: built once
        self._movable = np.zeros(n, dtype=bool)
        zeros, rows = np.zeros(n), np.zeros(m)
        self._highs = lp_model(matrix, zeros, zeros, zeros, rows, rows)
        self.solved = 0

    def movable(self, avoid: frozenset[int]) -> frozenset[int]:
        """The cells a deviation may move: the least pattern's but ``avoid``."""
        return self._least_cells - avoid

    def push(self, targets: Mapping[int, float], avoid: frozenset[int]) -> np.ndarray | None:
        """A deviation moving each ``targets`` cell as far towards its move as it can (at
        most that far), maximising the sum of the fractions reached; only the least
        pattern's cells but ``avoid`` move. None when the solver gave up."""
        self._restrict(avoid)
        cells = np.fromiter(targets, dtype=np.int32, count=len(targets))
        moves = np.fromiter(targets.values(), dtype=np.float64, count=len(targets))
        low, high = self._bounds(cells, self._movable)
        capped_low = np.where(moves < 0, np.maximum(low, moves), low)
        capped_high = np.where(moves > 0, np.minimum(high, moves), high)
        self._highs.changeColsBounds(len(cells), cells, capped_low, capped_high)
        self._highs.changeColsCost(len(cells), cells, -1.0 / moves)
        self._highs.run()
        self.solved += 1
        found = None
        if self._highs.getModelStatus() == highspy.HighsModelStatus.kOptimal:
            found = np.asarray(self._highs.getSolution().col_value, dtype=np.float64)
        self._highs.changeColsCost(len(cells), cells, np.zeros(len(cells)))
        self._highs.changeColsBounds(len(cells), cells, low, high)
        return found

    def _restrict(self, avoid: frozenset[int]) -> None:
        """Make the least pattern's cells but ``avoid`` movable, every other cell fixed."""
        target = self._least.copy()
        target[list(avoid)] = False
        changed = np.flatnonzero(target != self._movable).astype(np.int32)
        if len(changed):
            low, high = self._bounds(changed, target)
            self._highs.changeColsBounds(len(changed), changed, low, high)
            self._movable = target

    def _bounds(self, cells: np.ndarray, movable: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        down, up = self._room
        return np.where(movable[cells], down[cells], 0.0), np.where(movable[cells], up[cells], 0.0)
