"""The Guard: one policy, one locked-down backend, one state store, one query path."""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guard.audit.history import HistoryAudit
from guard.backends import open_backend
from guard.backends.base import Backend, TableInfo
from guard.cells import Cell, CellGrid, cells_from_result
from guard.errors import AccessDenied, GuardError, PolicyError, QueryRejected
from guard.explain import Explanation, explain_decision
from guard.noise.sampling import RandomSource
from guard.noise_stage import NoiseStage
from guard.policy.load import load_policy
from guard.policy.model import Analyst, LinkScope, NoiseMode, Policy, Role, Table
from guard.policy.model import HistoryAudit as HistoryMode
from guard.protect import protect_with_decision
from guard.protection.decide import Decision, Linking, Pattern, with_sums
from guard.protection.keys import aggregate_of, fixed_positions, key_encoder, key_from_text, key_text
from guard.query.analyze import analyze
from guard.query.parameters import Parameter
from guard.query.parse import parse
from guard.query.rewrite import rewrite
from guard.query.shape import Predicate, QueryShape
from guard.query.validate import validate
from guard.result import ProtectedResult
from guard.rules import depth
from guard.state.store import HistoryWrite, LogRecord, NoiseWrite, Release, StateStore
from guard.suppression import Key

__all__ = ["Guard"]


@dataclass
class _Progress:
    """How far a request got: what its log record can say about it."""

    shape: QueryShape | None = None
    info: TableInfo | None = None
    dimensions: tuple[str, ...] | None = None
    #: the SQL with its parameters bound (as literals, from the tree): what the log keeps
    bound_sql: str | None = None


class Guard:
    """Answers aggregate SQL with protected aggregates, for the analysts of one policy.

    Thread-safe: the server calls :meth:`query` from many threads at once.
    """

    def __init__(
        self, policy: Policy, backend: Backend, store: StateStore, rng: RandomSource | None = None
    ) -> None:
        """``rng``: the noise source; None is the system's secure source (seed only in tests)."""
        self.policy = policy
        self.backend = backend
        self.store = store
        #: largest contributions per cell the rules read
        self._depth = depth(policy.protection.rules)
        self._release_lock = threading.Lock()
        self._secret = store.secret()
        self._history: dict[tuple[str, str, str | None], dict[str, dict[Key, str]]] = {}
        #: (data version, table, space, key, analyst) already in released_cells
        self._written: set[tuple[str, str, str, Key, str]] = set()
        self.noise = NoiseStage(policy, store, self._secret, rng) if policy.uses_noise else None
        audit = policy.protection.history.audit is HistoryMode.EXACT
        self.history = HistoryAudit(policy, backend, store.audit_sets) if audit else None

    @classmethod
    def open(
        cls,
        policy_path: str | Path,
        state: str | Path | None = None,
        *,
        backend: str | None = None,
        rng: RandomSource | None = None,
    ) -> Guard:
        """Load the policy, open its data read-only and its state store.

        ``state`` overrides the policy's state folder (log, history, budgets); ``backend``
        the policy's engine (duckdb, postgres, spark); ``rng`` replaces the secure noise
        source (tests only).

        Raises:
            PolicyError: the policy or its sources are invalid.
            BackendError: the data or the state store cannot be opened.
        """
        policy = load_policy(policy_path, state, backend)
        store = StateStore(policy.state_dir)
        try:
            engine = open_backend(policy)
        except BaseException:
            store.close()
            raise
        return cls(policy, engine, store, rng)

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        if self.history is not None:
            self.history.close()
        self.backend.close()
        self.store.close()

    def query(self, sql: str, analyst: str, parameters: Sequence[Parameter] | None = None) -> ProtectedResult:
        """Answer ``sql`` for ``analyst``, or raise why not.

        ``parameters`` are bound to ``$1, $2, ...`` (or ``?``) as literals in the syntax
        tree, never spliced into the text; the log keeps the SQL and the values.

        Every request, answered or not, is logged before this returns or raises.

        Raises:
            AccessDenied: unknown analyst, or a table the analyst may not query.
            QueryRejected: the SQL's shape is not allowed (the message says what to change).
            QueryRefused: answering would disclose (the message names the control).
            BackendError: the engine or the state store failed.
        """
        started = time.perf_counter()
        progress = _Progress()

        def record(
            result: ProtectedResult,
            decision: Decision | None,
            noise: NoiseWrite | None,
            history: HistoryWrite | None,
        ) -> None:
            logged = progress.bound_sql or sql
            self._record_answer(
                analyst, logged, result, progress.shape, progress.info, started, decision, noise, history
            )

        try:
            result, _ = self._protected(sql, analyst, progress, record, parameters=parameters)
        except GuardError as error:
            logged = progress.bound_sql or sql
            self._record_refusal(analyst, logged, error, progress.shape, progress.info, started)
            raise
        return result  # 9 answer

    def explain(self, sql: str, analyst: str) -> Explanation:
        """What :meth:`query` would withhold and why, for data stewards: each withheld
        cell's feasibility interval against its protection level. Releases nothing and
        records nothing as released (the request is logged as "explained").

        The protection levels come from confidential contributions: never show an
        explanation to an analyst.

        Raises:
            as :meth:`query`.
        """
        started = time.perf_counter()
        progress = _Progress()

        def record(
            result: ProtectedResult,
            decision: Decision | None,
            noise: NoiseWrite | None,
            history: HistoryWrite | None,
        ) -> None:
            self.store.append(
                LogRecord(
                    analyst=analyst,
                    sql=sql,
                    decision="explained",
                    canonical=progress.shape.canonical if progress.shape else None,
                    data_version=progress.info.data_version if progress.info else None,
                    notes=result.notes,
                    elapsed_ms=(time.perf_counter() - started) * 1000,
                )
            )

        try:
            result, decision = self._protected(sql, analyst, progress, record, explaining=True)
        except GuardError as error:
            self._record_refusal(analyst, sql, error, progress.shape, progress.info, started)
            raise
        assert progress.dimensions is not None and decision is not None
        limit = self.policy.protection.suppression.audit_limit
        return explain_decision(result, decision, progress.dimensions, limit)

    def _protected(
        self,
        sql: str,
        analyst: str,
        progress: _Progress,
        record: Callable[[ProtectedResult, Decision | None, NoiseWrite | None, HistoryWrite | None], None],
        explaining: bool = False,
        parameters: Sequence[Parameter] | None = None,
    ) -> tuple[ProtectedResult, Decision | None]:
        """Stages 1-7, then ``record`` while the release lock is held."""
        who = self._analyst(analyst)
        tree = parse(sql, self.policy.limits, parameters)  # 1 parse
        if parameters is not None:
            progress.bound_sql = tree.sql(dialect="duckdb")
        visible = tuple(t for t in self.policy.tables if who.may_query(t.name))
        select, table = validate(tree, visible)  # 2 validate
        progress.info = info = self.backend.table_info(table.name)
        progress.shape = shape = analyze(select, table, info.types, self.policy.limits)  # 3 analyze
        if self.policy.noise_mode(table, who) is NoiseMode.NOISE:
            if explaining:
                raise QueryRejected(
                    f"explain shows cell suppression, and {table.name} is answered to {who.name} with "
                    "noise: nothing is suppressed; the answer's notes give each column's noise scale"
                )
            assert self.noise is not None
            prepared = self.noise.measure(
                shape, table, info, self.backend.execute, self.backend.capabilities
            )  # 5-6
            with self._release_lock:
                result = self.noise.release(
                    prepared, info, who, lambda r, write: record(r, None, write, None)
                )  # 7-8
            return result, None
        measured = with_sums(shape)  # an average is protected as the sum it implies
        plan = rewrite(measured, info, self._depth, self.backend.capabilities)  # 5 rewrite
        grid = cells_from_result(measured, plan, self.backend.execute(plan.query), info)  # 6 execute
        audited = self.history is not None and not explaining
        query_sets = self.history.query_sets(shape, table, info) if self.history and audited else []
        with self._release_lock:
            # protecting an answer and recording what it released is one step: two
            # answers protected at once could each be safe alone and not together
            linking = self._linking(who, table, shape, info)
            progress.dimensions = linking.dimensions
            result, decision = protect_with_decision(measured, grid, self.policy.protection, linking)  # 7
            screened = None
            if self.history is not None and audited:
                # 7b history audit: withhold what would complete a disclosure with earlier answers
                screened = self.history.screen(
                    who.name, shape, table, info, result, query_sets, grid, decision.order
                )
            record(result, decision, None, screened.write if screened else None)  # 8 record
        return result, decision

    def _linking(self, who: Analyst, table: Table, shape: QueryShape, info: TableInfo) -> Linking:
        """What this answer is protected together with: the earlier releases in scope."""
        dimensions = table.names(Role.DIMENSION)
        scope = self.policy.protection.suppression.linked
        fixed = None if scope is LinkScope.NONE else fixed_positions(shape, dimensions)
        history = {} if fixed is None else self._released(info, None if scope is LinkScope.ALL else who.name)
        secret = self._secret

        def seed(space: str, keys: Sequence[Key]) -> int:
            # fixed per released table, unpredictable without the store's secret (seed 004)
            message = json.dumps([info.data_version, shape.canonical, space, [key_text(k) for k in keys]])
            digest = hmac.new(secret, message.encode(), hashlib.sha256).digest()
            return int.from_bytes(digest[:8], "big")

        def fetch(space: str, patterns: Sequence[Pattern], filtered: bool) -> dict[Key, Cell]:
            predicates = shape.predicates if filtered else ()
            return self._cells_of_patterns(table, info, dimensions, space, patterns, predicates)

        lower_bounds: dict[str, float] = {}
        for column in table.columns:
            if column.role is Role.MEASURE and column.bounds is not None:
                lower_bounds[f"sum({column.name.lower()})"] = 0.0 if column.bounds[0] >= 0 else -math.inf
        return Linking(dimensions, fixed, history, fetch, seed, lower_bounds)

    def _cells_of_patterns(
        self,
        table: Table,
        info: TableInfo,
        dimensions: Sequence[str],
        space: str,
        patterns: Sequence[Pattern],
        predicates: tuple[Predicate, ...],
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
        plan = rewrite(shape, info, self._depth, self.backend.capabilities)
        grid: CellGrid = cells_from_result(shape, plan, self.backend.execute(plan.query), info)
        encode = key_encoder(dimensions, used, {})
        rolled = grid.rolled_up or [()] * len(grid.keys)
        return {encode(values, rolled[r]): grid.cells[r][0] for r, values in enumerate(grid.keys)}

    def _released(self, info: TableInfo, analyst: str | None) -> dict[str, dict[Key, str]]:
        """Earlier releases on this table and data version, cached (this process is the
        only writer of its store)."""
        cache_key = (info.data_version, info.name, analyst)
        if cache_key not in self._history:
            history: dict[str, dict[Key, str]] = {}
            for space, text, status in self.store.released(info.data_version, info.name, analyst):
                history.setdefault(space, {})[key_from_text(text)] = status
            self._history[cache_key] = history
        return self._history[cache_key]

    def budget(self, analyst: str | None = None) -> dict[str, Any]:
        """Privacy budgets (limit, spent, remaining per account) and every charge with
        the query it paid for; only ``analyst``'s own and shared accounts when given.

        Raises:
            AccessDenied: ``analyst`` is not declared.
            PolicyError: the policy has no noise mode (there are no budgets).
        """
        if analyst is not None:
            self._analyst(analyst)
        if self.noise is None:
            raise PolicyError(
                f"{self.policy.path.name}: noise: no table or analyst uses noise mode, so there are no "
                "privacy budgets; set noise.mode (policies/README.md, noise)"
            )
        return self.noise.report(analyst)

    def log(self, analyst: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        return self.store.log(analyst=analyst, limit=limit)

    def _analyst(self, name: str) -> Analyst:
        who = self.policy.analyst(name) if isinstance(name, str) else None
        if who is None:
            raise AccessDenied(
                f"unknown analyst {name!r}: the policy {self.policy.path.name} does not declare them"
            )
        return who

    def _record_answer(
        self,
        analyst: str,
        sql: str,
        result: ProtectedResult,
        shape: QueryShape | None,
        info: TableInfo | None,
        started: float,
        decision: Decision | None = None,
        noise: NoiseWrite | None = None,
        history: HistoryWrite | None = None,
    ) -> None:
        releases: list[Release] = []
        if decision is not None and info is not None:
            for space, cells in decision.releases.items():
                for key, status in cells.items():
                    # the store keeps the first status per analyst: skip what it has
                    written = (info.data_version, info.name, space, key, analyst)
                    if written not in self._written:
                        releases.append(Release(info.name, space, key_text(key), status))
        self.store.append(
            LogRecord(
                analyst=analyst,
                sql=sql,
                decision="answered",
                canonical=shape.canonical if shape else None,
                data_version=info.data_version if info else None,
                columns=result.columns,
                rows=result.to_dict()["rows"],
                flags=result.flags,
                notes=result.notes,
                elapsed_ms=(time.perf_counter() - started) * 1000,
            ),
            releases,
            noise,
            history,
        )
        if decision is not None and info is not None:
            for space, cells in decision.releases.items():
                self._written.update((info.data_version, info.name, space, k, analyst) for k in cells)
            # the store committed: now the in-memory history may say so too
            for released in self._history_scopes(info, analyst):
                for space, cells in decision.releases.items():
                    known = released.setdefault(space, {})
                    for key, status in cells.items():
                        if known.get(key) != "published":
                            known[key] = status

    def _history_scopes(self, info: TableInfo, analyst: str) -> list[dict[str, dict[Key, str]]]:
        return [
            h
            for (version, name, who), h in self._history.items()
            if version == info.data_version and name == info.name and who in (None, analyst)
        ]

    def _record_refusal(
        self,
        analyst: str,
        sql: str,
        error: GuardError,
        shape: QueryShape | None,
        info: TableInfo | None,
        started: float,
    ) -> None:
        decision = {
            "QueryRejected": "rejected",
            "BackendError": "error",
            "PolicyError": "error",
        }.get(error.kind, "refused")
        self.store.append(
            LogRecord(
                analyst=str(analyst),
                sql=sql if isinstance(sql, str) else repr(sql),
                decision=decision,
                canonical=shape.canonical if shape else None,
                data_version=info.data_version if info else None,
                error=error.kind,
                reason=error.message,
                elapsed_ms=(time.perf_counter() - started) * 1000,
            )
        )
