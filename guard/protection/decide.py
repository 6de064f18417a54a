"""Which cells of one answer to withhold: sensitive cells (primary suppression) and
enough others (secondary suppression) that no sensitive cell can be recomputed from
what this answer and the linked earlier releases publish.

For each additive quantity (:func:`~guard.protection.keys.space_of`) the answer's cells
are placed in the table's key space, next to the cells released earlier in the same
scope (policy ``suppression.linked``). The additive relations between keys (a total is
the sum of its members) are what an attacker can write down; for every relation the
attacker knows, its unreleased members are fetched too (as cells nobody has seen), so
each relation is complete and true. Then, on the connected part that touches this
answer:

* cells released before stay released (``kept``), cells withheld before stay withheld
  (``forced``), so a repeated query gets the same pattern and a new pattern never
  undoes an old one;
* :func:`guard.suppression.suppress` chooses the complementary cells (HiGHS MILP or LP
  heuristic, costs perturbed by a secret seed fixed per released table);
* the pattern's intervals are proven inside :func:`~guard.suppression.suppress` (exact
  certificates, or LP audit and repair); for tables up to ``suppression.audit_limit``
  cells an independent LP audit (:func:`guard.suppression.failures`) re-checks every
  sensitive cell's feasibility interval; a shortfall refuses the answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import partial

from guard.cells import Cell, CellGrid
from guard.errors import QueryRefused
from guard.policy.model import Protection
from guard.protection.keys import key_encoder
from guard.protection.linking import Linking
from guard.protection.relations import linked_component, relations_between
from guard.protection.sensitivity import is_frequency, judge
from guard.protection.sums import value_aggregates
from guard.protection.view import attacker_view, implied_by
from guard.query.shape import QueryShape
from guard.rules import RuleVerdict
from guard.state.records import ReleaseStatus
from guard.suppression import (
    UNVERIFIED_REFUSAL,
    Key,
    Method,
    ProtectionInfeasible,
    ProtectionLevels,
    ProtectionUnverified,
    Relation,
    SuppressionOptions,
    SuppressionResult,
    Table,
    Weight,
    failures,
    suppress,
)
from guard.suppression.standing import Standing, prove_standing
from guard.suppression.widest import requirements_within_widest

__all__ = [
    "REFUSED",
    "REFUSED_LINKED",
    "Decision",
    "SpaceReport",
    "Withheld",
    "WithheldKind",
    "decide",
]

#: largest attacker view (cells) whose requirements are first proven at the least
#: pattern (guard.suppression.standing); an LP over a larger one takes too long for
#: the many a view needs
MAX_STANDING_CELLS = 4_000
#: views up to this many cells are also proven there, with at most
#: :data:`STANDING_SOLVES_ABOVE` LPs, stopping past ``MAX_OPEN_LINKED`` left open: bench_core's
#: q17 after q12 (7,646 cells) proves its 2,846 in 0.16 s, where every new cell was
#: withheld; unbudgeted, the Fair session's Q8 (5,849 cells) spent 10-25 s for nothing
MAX_BUDGETED_STANDING_CELLS = 20_000
STANDING_SOLVES_ABOVE = 4

#: sensitive cells not proven at the least pattern (guard.suppression.standing) up to
#: which an answer linked to earlier releases is always solved online; above, an answer
#: of few new cells withholds them (see _protect_space)
MAX_LINKED_REQUIREMENTS = 300
#: of those, cells the answer does not hold (each is proven against every insider by a
#: few smallest-deviation LPs, guard.suppression.insiders: milliseconds each on a few
#: thousand cells; at 10, routine tables crossing rare categories withheld every new cell)
MAX_OPEN_LINKED = 100
#: new cells up to which such an answer withholds them rather than solving
MAX_FRESH_WITHHELD = 50


class WithheldKind(Enum):
    #: sensitive by a rule (``rule`` names it)
    PRIMARY = "primary"
    #: complementary: withheld so that no sensitive cell can be recomputed
    SECONDARY = "secondary"
    #: withheld by the exact history audit when it was answered before (the audit, which
    #: runs after this stage, withholds the cells of a new answer itself); ``rule`` is the
    #: audit's control then (a ``HistoryControl`` value), "" when none was recorded
    HISTORY = "history"


@dataclass(frozen=True)
class Withheld:
    """Why one cell is withheld (with the rules that found it sensitive, for a primary one)."""

    kind: WithheldKind
    rule: str = ""


@dataclass(frozen=True)
class SpaceReport:
    """The protection problem of one quantity, for ``guard explain`` (holds hidden
    values and protection levels: never shown to analysts)."""

    space: str
    table: Table | None
    suppressed: frozenset[Key]
    requirements: Mapping[Key, RuleVerdict]
    current: frozenset[Key]
    method: str
    optimal: bool
    #: cells of the problem released (published or withheld) by earlier answers
    earlier: frozenset[Key] = frozenset()
    #: the deviations that prove the pattern (kept for the next linked answer)
    proofs: tuple[Mapping[Key, float], ...] = field(default=(), repr=False)
    #: cells of the answer the history audit withheld when they were answered before
    audited: frozenset[Key] = frozenset()


@dataclass(frozen=True)
class Decision:
    withheld: dict[tuple[int, int], Withheld]
    #: per space: the answer's keys and whether each was published or withheld
    releases: dict[str, dict[Key, ReleaseStatus]]
    reports: list[SpaceReport]
    #: the grid row behind each row of the answer (after ORDER BY / LIMIT / OFFSET)
    order: tuple[int, ...] = ()
    #: each grid row's cell key (the same in every space)
    keys: tuple[Key, ...] = ()
    #: ``guard explain`` only: why the query would be refused (its space's report is
    #: then every cell that can be withheld, so that the intervals show what stays narrow)
    refusal: str | None = None

    @property
    def proofs(self) -> dict[str, tuple[Mapping[Key, float], ...]]:
        """Per space, the deviations that proved a pattern solved for this answer."""
        return {r.space: r.proofs for r in self.reports if r.proofs}


def decide(
    shape: QueryShape, grid: CellGrid, protection: Protection, linking: Linking, *, explain: bool = False
) -> Decision:
    """Withhold what the rules and the secondary suppression say, for every aggregate.

    ``shape`` must hold, for every sum space, a SUM aggregate (see :func:`value_aggregates`).
    ``explain``: an answer whose cells were all released before is also solved as a
    linked problem (its pattern fixed by the history), so that ``guard explain`` can show
    the intervals the earlier releases leave its withheld cells; it is still decided as
    a replay when that problem cannot be solved. A space no pattern protects is not
    refused but reported with every cell that can be withheld (method ``REFUSED``) and
    the refusal in ``Decision.refusal``.

    Raises:
        QueryRefused: no pattern protects every sensitive cell given what was released
            before, or the LP audit finds a sensitive cell too narrowly bounded.
    """
    linked = linking.fixed is not None
    encode = key_encoder(linking.dimensions, shape.group_by, linking.fixed or {})
    rolled = grid.rolled_up or [()] * len(grid.keys)
    keys = [encode(values, rolled[r]) for r, values in enumerate(grid.keys)]
    withheld: dict[tuple[int, int], Withheld] = {}
    releases: dict[str, dict[Key, ReleaseStatus]] = {}
    reports: list[SpaceReport] = []
    judged = _judge(linking, protection)
    refusal = None
    for space, (value_index, members) in value_aggregates(shape).items():
        current = {keys[r]: grid.cells[r][value_index] for r in range(len(keys))}
        verdicts = {key: judged(cell, space) for key, cell in current.items()}
        history = linking.history.get(space, {}) if linked else {}
        report = _protect_space(space, current, verdicts, history, linking, protection, explain)
        audited = frozenset(k for k in current if k in history and history[k].by_history)
        report = replace(report, audited=audited & report.suppressed)
        reports.append(report)
        if report.method == REFUSED:
            refusal = refusal or (REFUSED_LINKED if history else _REFUSED_INFEASIBLE)
        status: dict[Key, ReleaseStatus] = {}
        for r, key in enumerate(keys):
            hidden = key in report.suppressed
            status[key] = ReleaseStatus.WITHHELD if hidden else ReleaseStatus.PUBLISHED
            if not hidden:
                continue
            verdict = verdicts[key]
            if verdict.sensitive:
                reason = Withheld(WithheldKind.PRIMARY, verdict.rule)
            elif key in report.audited:  # stays the history audit's, its control with it (the notes)
                reason, status[key] = Withheld(WithheldKind.HISTORY, history[key].control or ""), history[key]
            else:
                reason = Withheld(WithheldKind.SECONDARY)
            for a in members:
                withheld[(r, a)] = reason
        if linked:
            releases[space] = status
    return Decision(withheld, releases, reports, keys=tuple(keys), refusal=refusal)


def _protect_space(
    space: str,
    current: dict[Key, Cell],
    verdicts: dict[Key, RuleVerdict],
    history: Mapping[Key, ReleaseStatus],
    linking: Linking,
    protection: Protection,
    explain: bool = False,
    replay: bool = True,
) -> SpaceReport:
    sensitive_now = frozenset(k for k, v in verdicts.items() if v.sensitive)
    if replay and current and all(k in history for k in current):
        # every cell was released before (a repeated or re-phrased query): the earlier
        # decisions stand, and publishing nothing new cannot weaken them
        withheld = frozenset(k for k in current if history[k] is not ReleaseStatus.PUBLISHED)
        if sensitive_now <= withheld:
            replayed = SpaceReport(space, None, withheld, verdicts, frozenset(current), "replayed", True)
            if not explain:
                return replayed
            try:  # the same pattern, solved with every cell fixed: its intervals
                report = _protect_space(space, current, verdicts, history, linking, protection, replay=False)
            except QueryRefused:
                return replayed
            if report.suppressed != withheld:
                return replayed
            return replace(report, method=f"as released before ({report.method})")
    cells: Mapping[Key, Cell] = current
    if linking.fetch is not None:
        cells = attacker_view(space, current, history, linking)
    relations = relations_between(cells)
    component = linked_component(cells, current, relations)
    relations = tuple(r for r in relations if r.total in component)
    if not relations:
        return SpaceReport(space, None, sensitive_now, verdicts, frozenset(current), "none", True)

    judged = _judge(linking, protection)
    others = {k: judged(component[k], space) for k in component if k not in current}
    requirements = {k: v for k, v in {**verdicts, **others}.items() if v.sensitive}
    kept = {k for k in component if history.get(k) == ReleaseStatus.PUBLISHED}
    forced = {k for k in component if k in history or k not in current} - kept
    if any(k in kept for k in requirements):
        # published earlier under other settings: it cannot be withdrawn now
        raise QueryRefused(REFUSED_LINKED)
    earlier = frozenset(k for k in component if k in history)
    fresh = frozenset(k for k in current if history.get(k) != ReleaseStatus.PUBLISHED)
    table = _table(space, component, relations, linking)
    # the sole contributor of a magnitude cell knows its value: protect against them too
    singletons = () if is_frequency(space) else [k for k, c in component.items() if c.units == 1]
    open_requirements: Mapping[Key, ProtectionLevels] = requirements
    standing: Standing | None = None
    apart = {k: v for k, v in requirements.items() if k not in current}
    if apart and len(table) <= MAX_BUDGETED_STANDING_CELLS:
        # the sensitive cells the answer does not hold (never released, or withheld
        # before): most stay wide whatever it publishes. Those proven at the least
        # pattern (every cell that is withheld anyway) are protected by every pattern,
        # and the pattern is chosen for the others only (guard.suppression.standing)
        few = bool(earlier) and len(fresh) <= MAX_FRESH_WITHHELD
        budgeted = len(table) > MAX_STANDING_CELLS  # an LP there takes 35-150 ms
        standing = prove_standing(
            table,
            apart,
            forced | set(requirements),
            singletons,
            max_solves=STANDING_SOLVES_ABOVE if budgeted else None,
            max_open=MAX_OPEN_LINKED if few or budgeted else None,
            prior=linking.proofs.get(space, ()),
        )
        open_requirements = {k: v for k, v in requirements.items() if k not in standing.proven}
    open_apart = [k for k in open_requirements if k not in current]
    large = len(open_requirements) > MAX_LINKED_REQUIREMENTS or len(open_apart) > MAX_OPEN_LINKED
    if earlier and large and len(fresh) <= MAX_FRESH_WITHHELD:
        # a few new cells over a problem with many sensitive cells not proven at the
        # least pattern (e.g. a grand total after an 8 000-cell table) would need LPs
        # per sensitive cell and insider over everything: minutes. Publishing nothing
        # new keeps every earlier, verified release as it was, at the cost of these few
        # cells; a new cell whose value the published cells already fix (a total of
        # published parts) is new to no one.
        new = frozenset(k for k in fresh if k not in history and k not in sensitive_now)
        implied = implied_by(relations, kept, new)
        if linking.known is not None and new - implied:
            # or whose value the released answers determine in any key space (history audit)
            implied |= linking.known(space, new - implied)
        withheld = fresh - implied
        method = "withheld" if withheld else "implied"
        # no table in the report: the pattern was not solved, so there are no intervals to explain
        return SpaceReport(space, None, withheld, requirements, frozenset(current), method, True, earlier)
    settings = protection.suppression
    options = SuppressionOptions(
        weight=Weight(settings.weight),
        method=None if settings.method == "auto" else Method(settings.method),
        optimal_limit=settings.optimal_limit,
        time_limit=settings.time_limit,
    )
    seed = linking.seed(space, sorted(current, key=repr))
    prior = tuple(linking.proofs.get(space, ()))
    if standing is not None and open_requirements:
        prior += standing.proofs(table)

    def solve(requirements: Mapping[Key, ProtectionLevels]) -> SuppressionResult:
        return suppress(
            table,
            requirements,
            options=options,
            seed=seed,
            forced=forced,
            kept=kept,
            singletons=singletons,
            prior=prior,
            unasked=open_apart,
        )

    try:
        try:
            result = solve(open_requirements)
        except ProtectionUnverified:
            raise
        except ProtectionInfeasible:
            if not open_apart:
                raise
            # a cell no answer holds may be narrow already by the earlier releases
            # alone: the answer is held to what it would narrow further
            # (guard.suppression.widest)
            open_requirements = requirements_within_widest(table, open_requirements, open_apart, kept)
            result = solve(open_requirements)
    except ProtectionUnverified:
        # a budget ran out: say so, rather than claim a recomputation was found
        raise QueryRefused(UNVERIFIED_REFUSAL) from None
    except ProtectionInfeasible:
        if explain:  # what stays too narrow with every cell that can be withheld withheld
            most = frozenset(component) - kept
            return SpaceReport(space, table, most, requirements, frozenset(current), REFUSED, False, earlier)
        raise QueryRefused(REFUSED_LINKED if history else _REFUSED_INFEASIBLE) from None
    # every sensitive cell's interval is already proven by a certificate (a feasible point
    # of the audit LP at each end) or LP-audited inside suppress(); small tables are
    # audited once more, independently, by LP
    if len(table) <= settings.audit_limit and failures(table, result.suppressed, open_requirements):
        raise QueryRefused(
            "refused by the LP audit of cell suppression: a sensitive cell would keep too narrow an "
            "interval; ask for fewer cells (fewer totals or grouping levels)"
        )
    return SpaceReport(
        space,
        table,
        frozenset(result.suppressed),
        requirements,
        frozenset(current),
        result.method.value,
        result.optimal,
        earlier,
        _kept_proofs(result, standing, table) if linking.fixed is not None else (),
    )


def _judge(linking: Linking, protection: Protection) -> Callable[[Cell, str], RuleVerdict]:
    """:func:`judge` on ``protection``, through the guard's remembered verdicts when made for it."""
    memo = linking.verdicts
    own = memo is not None and memo.protection is protection
    return memo if own and memo is not None else partial(judge, protection=protection)


def _kept_proofs(
    result: SuppressionResult, standing: Standing | None, table: Table
) -> tuple[Mapping[Key, float], ...]:
    """What the next linked answer re-checks instead of proving again: the pattern's
    proofs (which hold the standing ones it was given), or the standing proofs alone
    when nothing was left for the pattern to prove."""
    if result.proofs or standing is None:
        return tuple(result.proofs)
    return standing.proofs(table)


#: the method of a space no pattern protects (``guard explain`` only: the query is refused)
REFUSED = "refused"
REFUSED_LINKED = (
    "refused by secondary cell suppression: together with cells released earlier, this answer "
    "would let a protected cell be recomputed; ask for other groupings or filters"
)
_REFUSED_INFEASIBLE = (
    "refused by secondary cell suppression: no set of withheld cells protects every sensitive "
    "cell of this table; ask for fewer totals or coarser groups"
)


def _table(
    space: str, component: Mapping[Key, Cell], relations: Sequence[Relation], linking: Linking
) -> Table:
    values = {k: float(c.value) if c.value is not None else 0.0 for k, c in component.items()}
    lower = 0.0
    if not is_frequency(space):
        declared = linking.lower_bounds.get(space)
        lower = declared if declared is not None else (0.0 if min(values.values()) >= 0 else -math.inf)
    try:
        return Table.from_cells(values, lower={k: lower for k in values}, relations=relations)
    except ValueError:
        raise QueryRefused(
            "refused by cell suppression: the cells of this answer do not add up exactly to their "
            "totals (floating-point measure); ask without totals"
        ) from None
