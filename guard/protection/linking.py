"""What one answer is protected together with: the earlier releases on its table.

The :class:`Linker` owns the guard's memory of released cells (per data version, table
and scope, loaded from the state store once and then kept current on commit), the
secret seed of each released table's suppression costs, and the cells an attacker's
relations need that no answer released (computed by one backend query through the
planner). :func:`guard.protection.decide.decide` reads all of it through a
:class:`Linking` value and never reaches the engine or the store itself.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from guard.backends.base import Backend, TableInfo
from guard.cells import Cell, CellGrid, cells_from_result
from guard.plan.rewrite import rewrite
from guard.policy.model import Analyst, LinkScope, Policy, Role, Table
from guard.protection.keys import (
    aggregate_of,
    fixed_positions,
    key_encoder,
    key_from_text,
    key_text,
    space_of,
)
from guard.protection.sensitivity import Verdicts
from guard.query.shape import Condition, QueryShape
from guard.state.records import Release, ReleaseStatus
from guard.suppression import Key

__all__ = ["Fetch", "Linker", "Linking", "Pattern", "standalone"]

#: which dimensions a key fixes (True) or adds over (False)
Pattern = tuple[bool, ...]
#: (space, patterns, filtered) -> every non-empty cell of those patterns over the whole
#: table, or (filtered) over the rows the answer's own filter selects
Fetch = Callable[[str, Sequence[Pattern], bool], Mapping[Key, Cell]]
#: per space, the keys released earlier in scope and their status
Released = dict[str, dict[Key, ReleaseStatus]]


#: deviations kept per space for the next linked answer (memory: each maps the cells it
#: moves to their moves)
MAX_PROOFS = 20_000


@dataclass(frozen=True)
class Linking:
    """What the answer is protected together with.

    Attributes:
        dimensions: the protected table's dimensions, in policy order (the key space).
        fixed: key positions the answer's filter fixes; None when its filter is not a
            key (its cells then form a table of their own, linked to nothing).
        history: per space, the keys released earlier in scope and their status.
        fetch: computes cells of given patterns over the whole table (or the rows
            the answer's filter selects).
        seed: the secret seed of a released table, from its space and keys (the data
            version and the query's canonical key are bound in by the :class:`Linker`).
        lower_bounds: per sum space, the a-priori lower bound of a cell (0 or -inf).
        proofs: per space, the attacker deviations that proved the last pattern solved
            over this table's cells (``SuppressionResult.proofs``), for the next one to
            re-check and reuse; empty when the answer is not linked.
        known: ``known(space, keys)``: those of this answer's ``keys`` whose values the
            earlier releases already determine (:meth:`Linker.with_known`; asked only when
            new cells would otherwise be withheld): published, they tell no one anything.
        verdicts: the rules' verdicts on cells, remembered across the answers of one
            guard (used when made for the protection the answer is decided with).
    """

    dimensions: tuple[str, ...]
    fixed: Mapping[int, str] | None
    history: Mapping[str, Mapping[Key, ReleaseStatus]]
    fetch: Fetch | None
    seed: Callable[[str, Sequence[Key]], int | None]
    lower_bounds: Mapping[str, float] = field(default_factory=dict)
    proofs: Mapping[str, Sequence[Mapping[Key, float]]] = field(default_factory=dict)
    known: Callable[[str, frozenset[Key]], frozenset[Key]] | None = None
    verdicts: Verdicts | None = None


def standalone(shape: QueryShape) -> Linking:
    """Protect an answer on its own: no earlier releases, a fresh secret seed."""
    return Linking(dimensions=shape.group_by, fixed=None, history={}, fetch=None, seed=lambda *_: None)


class Linker:
    """Earlier releases and the cells linked with them, for one guard.

    Not thread-safe on its own: the guard calls it under its release lock, since
    protecting an answer and recording what it released is one step.
    """

    def __init__(
        self,
        policy: Policy,
        backend: Backend,
        secret: bytes,
        depth: int,
        load: Callable[[str, str, str | None], list[tuple[str, str, ReleaseStatus]]],
    ) -> None:
        """``load(data_version, table, analyst)`` reads (space, key text, status) of the
        cells released to ``analyst`` (None: anyone) from the state store."""
        self._policy = policy
        self._backend = backend
        self._secret = secret
        self._depth = depth
        self._load = load
        self._released: dict[tuple[str, str, str | None], Released] = {}
        #: (data version, table, space, key, analyst) already in the store
        self._written: set[tuple[str, str, str, Key, str]] = set()
        #: (data version, table) -> space -> the deviations of the last pattern solved
        self._proofs: dict[tuple[str, str], dict[str, Sequence[Mapping[Key, float]]]] = {}
        self._verdicts = Verdicts(policy.protection)

    def linking(self, who: Analyst, table: Table, shape: QueryShape, info: TableInfo) -> Linking:
        """What an answer of ``who`` to ``shape`` is protected together with."""
        dimensions = table.names(Role.DIMENSION)
        scope = self._policy.protection.suppression.linked
        fixed = None if scope is LinkScope.NONE else fixed_positions(shape, dimensions)
        history: Released = {}
        if fixed is not None:
            history = self._earlier(info, None if scope is LinkScope.ALL else who.name)
        secret = self._secret

        def seed(space: str, keys: Sequence[Key]) -> int:
            # fixed per released table, unpredictable without the store's secret (seed 004);
            # not per data version: a change elsewhere in the data must not redraw the
            # pattern of a table, or two patterns of it could be combined
            message = json.dumps([shape.canonical, space, [key_text(k) for k in keys]])
            digest = hmac.new(secret, message.encode(), hashlib.sha256).digest()
            return int.from_bytes(digest[:8], "big")

        def fetch(space: str, patterns: Sequence[Pattern], filtered: bool) -> dict[Key, Cell]:
            predicates = shape.predicates if filtered else ()
            return self._cells_of_patterns(table, info, dimensions, space, patterns, predicates)

        lower_bounds: dict[str, float] = {}
        for column in table.columns:
            if column.role is Role.MEASURE and column.bounds is not None:
                lower_bounds[f"sum({column.name.lower()})"] = 0.0 if column.bounds[0] >= 0 else -math.inf
        proofs = self._proofs.get((info.data_version, info.name), {}) if fixed is not None else {}
        return Linking(dimensions, fixed, history, fetch, seed, lower_bounds, proofs, verdicts=self._verdicts)

    def with_known(
        self,
        linking: Linking,
        shape: QueryShape,
        grid: CellGrid,
        rows: Callable[[Collection[int]], Mapping[int, frozenset[int]]],
    ) -> Linking:
        """``linking`` that can tell which of the answer's cells the earlier releases
        already determine: ``rows(candidates)`` gives, per aggregate of ``shape``, the
        candidate rows of ``grid`` whose query set the history audit finds in the span
        of the released ones (exactly, on rows: a range or a difference of answers in
        another key space counts too). Only where every analyst's releases are linked
        (``linked: all``): the audit's scope is then within the linked one, so what it
        knows every linked table may know."""
        if linking.fixed is None or self._policy.protection.suppression.linked is not LinkScope.ALL:
            return linking
        encode = key_encoder(linking.dimensions, shape.group_by, linking.fixed)
        rolled = grid.rolled_up or [()] * len(grid.keys)
        row_of = {encode(values, rolled[r]): r for r, values in enumerate(grid.keys)}

        def known(space: str, keys: frozenset[Key]) -> frozenset[Key]:
            found = rows([row_of[k] for k in keys if k in row_of])
            hits = {r for a, each in found.items() if space_of(shape.aggregates[a]) == space for r in each}
            return frozenset(k for k in keys if row_of.get(k) in hits)

        return replace(linking, known=known)

    def new_releases(
        self, releases: Mapping[str, Mapping[Key, ReleaseStatus]], info: TableInfo, analyst: str
    ) -> list[Release]:
        """The released-cell rows an answer adds to the store (the store keeps the first
        status per analyst: what it already has is left out)."""
        rows: list[Release] = []
        for space, cells in releases.items():
            for key, status in cells.items():
                if (info.data_version, info.name, space, key, analyst) not in self._written:
                    rows.append(Release(info.name, space, key_text(key), status))
        return rows

    def committed(
        self,
        releases: Mapping[str, Mapping[Key, ReleaseStatus]],
        info: TableInfo,
        analyst: str,
        proofs: Mapping[str, Sequence[Mapping[Key, float]]] | None = None,
    ) -> None:
        """The store committed ``releases``: memory may say so now, and keep the
        deviations that proved the answer's patterns (``proofs``, per space; at most
        :data:`MAX_PROOFS` each) for the next answer linked with them."""
        if proofs:
            kept = self._proofs.setdefault((info.data_version, info.name), {})
            kept.update({space: tuple(found[:MAX_PROOFS]) for space, found in proofs.items()})
        for space, cells in releases.items():
            self._written.update((info.data_version, info.name, space, k, analyst) for k in cells)
        for (version, name, who), known in self._released.items():
            if version != info.data_version or name != info.name or who not in (None, analyst):
                continue
            for space, cells in releases.items():
                earlier = known.setdefault(space, {})
                for key, status in cells.items():
                    if earlier.get(key) is not ReleaseStatus.PUBLISHED:
                        earlier[key] = status

    def _earlier(self, info: TableInfo, analyst: str | None) -> Released:
        """Earlier releases on this table and data version, cached (this process is the
        only writer of its store)."""
        cache_key = (info.data_version, info.name, analyst)
        if cache_key not in self._released:
            released: Released = {}
            for space, text, status in self._load(info.data_version, info.name, analyst):
                released.setdefault(space, {})[key_from_text(text)] = status
            self._released[cache_key] = released
        return self._released[cache_key]

    def _cells_of_patterns(
        self,
        table: Table,
        info: TableInfo,
        dimensions: Sequence[str],
        space: str,
        patterns: Sequence[Pattern],
        predicates: tuple[Condition, ...],
    ) -> dict[Key, Cell]:
        """Every non-empty cell of ``patterns`` over the rows ``predicates`` select, in one
        backend query."""
        used = tuple(d for j, d in enumerate(dimensions) if any(p[j] for p in patterns))
        sets = tuple(tuple(d for j, d in enumerate(dimensions) if p[j]) for p in patterns)
        plain = len(sets) == 1 and sets[0] == used
        shape = QueryShape(
            table=table.name,
            predicates=predicates,
            group_by=used,
            grouping_sets=() if plain else sets,
            aggregates=(aggregate_of(space),),
            outputs=(),
        )
        plan = rewrite(shape, info, self._depth, self._backend.capabilities)
        grid: CellGrid = cells_from_result(shape, plan, self._backend.execute(plan.query), info)
        encode = key_encoder(dimensions, used, {})
        rolled = grid.rolled_up or [()] * len(grid.keys)
        return {encode(values, rolled[r]): grid.cells[r][0] for r, values in enumerate(grid.keys)}
