"""The Guard: one policy, one locked-down backend, one state store, one query path.

:meth:`Guard.query` reads as the stages of the query path (docs/ARCHITECTURE.md), each
one call into the package that owns it; this module only orders them, holds the
release lock, and makes sure every request is logged whatever happens.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from guard.backends import open_backend
from guard.backends.base import Backend, TableInfo
from guard.cells import CellGrid, CellReader
from guard.errors import AccessDenied, GuardError, InternalError, NoBudgets, QueryRejected
from guard.history.finest import SpaceCells
from guard.history.preview import preview
from guard.history.screen import FinestSensitivity, HistoryScreen, Screened
from guard.noise.sampling import RandomSource
from guard.noise.stage import NoiseStage
from guard.policy.load import load_policy
from guard.policy.model import Analyst, HistoryMode, NoiseMode, Policy, Table
from guard.post.plan import OuterPlan, explain_inners, plan_outer
from guard.post.run import describe_outer, run_outer
from guard.protection.answer import protect_with_decision
from guard.protection.explain import Explanation, explain_decision, noised_rejection
from guard.protection.finest import finest_flagged
from guard.protection.linking import Linker
from guard.protection.patterns import PatternCache
from guard.protection.screened import screened_releases
from guard.protection.sums import with_sums
from guard.query.front import FrontCache, FrontResult, Trace, read_query
from guard.query.listing import listed_answer
from guard.query.parameters import Parameter
from guard.query.rejections import Rejections, standing
from guard.query.shape import OutputKind, QueryShape
from guard.result import ProtectedResult
from guard.rules import depth
from guard.state.recorder import Recorder, RequestFacts
from guard.state.store import StateStore

__all__ = ["Guard"]


@dataclass
class _Request:
    """One request as far as it got: what its log record can say about it."""

    analyst: str
    sql: str
    started: float = field(default_factory=time.perf_counter)
    trace: Trace = field(default_factory=Trace)
    shape: QueryShape | None = None
    info: TableInfo | None = None
    log_id: int | None = None  #: the log row of its answer, once recorded

    def facts(self, bound: bool = True) -> RequestFacts:
        """``bound``: log the SQL with its parameters bound (as literals, from the tree)."""
        sql = (self.trace.bound_sql if bound else None) or self.sql
        return RequestFacts(
            analyst=self.analyst if isinstance(self.analyst, str) else repr(self.analyst),
            sql=sql,
            started=self.started,
            canonical=self.shape.canonical if self.shape else None,
            data_version=self.info.data_version if self.info else None,
        )


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
        self._reader = CellReader(backend, self._depth)
        self.front = FrontCache(policy, self.column_types)  # stages 1-3, also for Describe
        self.rejections = Rejections(policy, self.column_types)  # texts rejected before
        #: deciding and recording one answer is one step (see _answer)
        self._release_lock = threading.Lock()
        secret = store.secret()
        self.recorder = Recorder(store, policy.limits.max_sql_length)
        self.linker = Linker(policy, backend, secret, self._depth, store.released)
        #: the cells of whole key patterns an attacker reasons with, per data version
        self._patterns = PatternCache(backend)
        self.noise = NoiseStage(policy, store, secret, rng) if policy.uses_noise else None
        exact = policy.protection.history.audit is HistoryMode.EXACT
        self.history = HistoryScreen(policy, backend, store, self._finest_sensitivity) if exact else None

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

    def prepare(self) -> list[str]:
        """Build now what the first answer on each table would otherwise pay for (servers call
        it before they accept connections): every audited table's history state, and the
        cells released on the current data version to each analyst answered without noise.
        Returns the tables whose history state was prepared; raises BackendError when the
        engine or the state store fails."""
        prepared = [] if self.history is None else self.history.prepare(self._release_lock)
        for table in self.policy.tables:
            exact = [
                a for a in self.policy.analysts if self.policy.noise_mode(table, a) is not NoiseMode.NOISE
            ]
            if exact:
                info = self.backend.table_info(table.name)
                whole = read_query(
                    f'SELECT COUNT(*) FROM "{table.name}"', self.policy, None, self.column_types
                )
                with self._release_lock:  # reads (and keeps) each scope's earlier releases
                    for who in exact:
                        self.linker.linking(who, table, whole.shape, info)
        return prepared

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._reader.close()
        if self.history is not None:
            self.history.close()
        self.backend.close()
        self.store.close()

    def query(self, sql: str, analyst: str, parameters: Sequence[Parameter] | None = None) -> ProtectedResult:
        """Answer ``sql`` for ``analyst``, or raise why not.

        ``parameters`` are bound to ``$1, $2, ...`` (or ``?``) as literals in the syntax
        tree, never spliced into the text; the log keeps the SQL and the values. Every
        request, answered or not, is logged before this returns or raises.

        A query over protected answers (a computation on a SELECT's own aggregates,
        subqueries in FROM, CTEs, UNION or joins of aggregate queries; ``guard.post``)
        asks each inner query as its own request, then computes the rest on their
        protected answers only, and logs that too.

        Raises:
            AccessDenied: unknown analyst, or a table the analyst may not query.
            QueryRejected: the SQL's shape is not allowed (the message says what to change).
            QueryRefused: answering would disclose (the message names the control).
            BackendError: the engine or the state store failed.
            InternalError: anything else went wrong (logged, with the fault's class only).
        """
        request = _Request(analyst, sql)
        return self._recorded(request, lambda: self._answer_or_post(request, parameters))

    def _recorded(self, request: _Request, answer: Callable[[], ProtectedResult]) -> ProtectedResult:
        """``answer()``; a failure is logged as ``request``'s, then raised."""
        try:
            return answer()
        except GuardError as error:
            self.recorder.failed(request.facts(), error)
            raise
        except Exception as error:  # a fault, not a decision: logged, then reported as one
            raise self._internal(request, error) from error

    def _answer_or_post(self, request: _Request, parameters: Sequence[Parameter] | None) -> ProtectedResult:
        types = self.rejections.recall(request.sql, request.analyst, parameters)  # rejected before?
        try:
            return self._answer(request, parameters)
        except QueryRejected as rejected:
            stands, front = rejected, request.shape is None  # front: before any data was read
            try:
                outer = self._outer(request, parameters)  # a plain query's rejection stands
            except QueryRejected as error:
                outer, stands = None, error
            if outer is None:
                if front and types is not None:
                    keep = self.rejections.keep
                    keep(request.sql, request.analyst, parameters, stands.message, types, self._reread)
                raise stands from None
        return self._post(request, outer)

    def _reread(self, analyst: str, sql: str) -> str | None:
        """The message of the standing rejection of ``sql`` for ``analyst`` (no record)."""
        request, who = _Request(analyst, sql), self._analyst(analyst)
        return standing(lambda: self._front(request, who, None), lambda: self._outer(request, None))

    def _outer(self, request: _Request, parameters: Sequence[Parameter] | None) -> OuterPlan | None:
        """The plan of a query over protected answers, or None when the plain path's
        rejection of ``request`` stands (it came after stages 1-3, or the text is not one)."""
        if request.shape is not None:
            return None
        who = self._analyst(request.analyst)
        plan = plan_outer(request.sql, self.policy, who, self.column_types, parameters)
        if plan is not None:
            describe_outer(plan)  # runs on empty answers: fail before any inner query is asked
        return plan

    def _post(self, request: _Request, plan: OuterPlan) -> ProtectedResult:
        """Each inner query asked (protected and logged) as if alone, then the outer
        query computed on their answers and logged with the inner queries' log ids."""
        answers: list[ProtectedResult] = []
        logged: list[int] = []
        for inner in plan.inners:
            asked = _Request(request.analyst, inner.sql)
            answers.append(self._recorded(asked, partial(self._answer, asked, None)))
            assert asked.log_id is not None
            logged.append(asked.log_id)
        result = run_outer(plan, answers)
        request.log_id = self.recorder.post_processed(request.facts(), result, logged)
        return result

    def _answer(self, request: _Request, parameters: Sequence[Parameter] | None) -> ProtectedResult:
        """The stages of the query path, in order."""
        who = self._analyst(request.analyst)
        front = self._front(request, who, parameters)  # 1-3 parse, validate, analyze
        info = request.info
        assert info is not None
        if self.policy.noise_mode(front.table, who, front.shape.summed) is NoiseMode.NOISE:
            return self._answer_with_noise(request, front, info, who)
        shape = with_sums(front.shape)  # 4-5 plan, execute (an average is protected as its sums)
        audit = partial(h.query_sets, front.shape, front.table, info) if (h := self.history) else None
        grid, sets = self._reader.grid_beside(shape, info, audit)  # and the audit's query sets
        with self._release_lock:
            # protecting an answer and recording what it released is one step: two
            # answers protected at once could each be safe alone and not together
            linking = self.linker.linking(who, front.table, front.shape, info)  # 6a linked releases
            linking = self._patterns.linking(linking, front.shape, info)
            if self.history is not None and sets is not None:  # what the history determines is no news
                known = partial(self.history.known_rows, who.name, front.shape, front.table, info, sets, grid)
                linking = self.linker.with_known(linking, front.shape, grid, known)
            result, decision = protect_with_decision(shape, grid, self.policy.protection, linking)  # 6b
            screened = self._screen(who, front, info, result, shape, grid, decision.order, sets)  # 6c history
            result = self._answered(front, result.withholding(screened.withheld, screened.notes))
            statuses = screened_releases(decision, front.shape, screened.controls)
            releases = self.linker.new_releases(statuses, info, who.name)
            # 7 queued in decision order, committed below with the records queued meanwhile; the
            # next decision sees these releases (if the commit fails, it is only stricter)
            pending = self.recorder.answer_queued(request.facts(), result, releases, screened.write)
            self.linker.committed(statuses, info, who.name, decision.proofs)
        request.log_id = self.store.wait(pending)  # nothing leaves before its record is durable
        return result  # 8 answer

    def _answer_with_noise(
        self, request: _Request, front: FrontResult, info: TableInfo, who: Analyst
    ) -> ProtectedResult:
        """Stages 4-8 for a table answered with noise."""
        assert self.noise is not None
        capabilities = self.backend.capabilities
        prepared = self.noise.measure(front.shape, front.table, info, self.backend.execute, capabilities)
        with self._release_lock:
            release = self.noise.release(prepared, info, who)  # 6 budget check, noise
            result = self._answered(front, release.result)
            log_id = self.recorder.answered(request.facts(), result, noise=release.write)  # 7
            self.noise.committed(release, log_id)
            request.log_id = log_id
        return result  # 8 answer

    def _answered(self, front: FrontResult, result: ProtectedResult) -> ProtectedResult:
        """The answer as asked: a list of values keeps those whose count is released, and
        drops the count; any other answer says which columns are aggregates (flag columns)."""
        if front.listing is not None:
            return listed_answer(result, front.listing, self.policy.protection.min_query_set_size)
        outputs = front.shape.outputs
        return result.with_aggregates(i for i, o in enumerate(outputs) if o.kind is OutputKind.AGGREGATE)

    def explain(self, sql: str, analyst: str) -> Explanation:
        """What :meth:`query` would withhold and why, for data stewards: each withheld
        cell's interval against its protection level, each value the history audit would
        withhold and its control. Releases nothing (the request is logged as "explained").

        The protection levels come from confidential contributions: never show an
        explanation to an analyst.

        Raises:
            as :meth:`query`; QueryRejected naming the inner queries of a query over
            protected answers (WITH, subqueries), which are explained one at a time.
        """
        request = _Request(analyst, sql)
        try:
            who = self._analyst(analyst)
            try:
                front = self._front(request, who, None)
            except QueryRejected as rejected:  # a query over protected answers: its inner ones
                outer = self._outer(request, None)
                raise (rejected if outer is None else QueryRejected(explain_inners(outer))) from None
            info = request.info
            assert info is not None
            if self.policy.noise_mode(front.table, who, front.shape.summed) is NoiseMode.NOISE:
                raise noised_rejection(front.table.name, who.name)
            (shape, grid), protection = self._cells(front.shape, info), self.policy.protection
            with self._release_lock:
                linking = self.linker.linking(who, front.table, front.shape, info)
                linking = self._patterns.linking(linking, front.shape, info)
                result, decision = protect_with_decision(shape, grid, protection, linking, explain=True)
                seen = preview(self.history, who.name, front.shape, info, result, grid, decision.order, shape)
                self.recorder.explained(request.facts(bound=False), seen.result)
        except GuardError as error:
            self.recorder.failed(request.facts(bound=False), error)
            raise
        except Exception as error:
            raise self._internal(request, error) from error
        limit = protection.suppression.audit_limit
        return explain_decision(seen.result, decision, linking, limit, front.shape, seen.held())

    def _front(self, request: _Request, who: Analyst, parameters: Sequence[Parameter] | None) -> FrontResult:
        """Stages 1-3, noting on ``request`` what the log needs as it goes."""
        front = self.front.read(request.sql, who, parameters, request.trace)
        request.shape = front.shape
        request.info = self.backend.table_info(front.table.name)
        return front

    def column_types(self, table: str) -> Mapping[str, str]:
        """The engine's column types of the declared ``table`` (lower-cased names)."""
        return self.backend.table_info(table).types

    def _cells(self, shape: QueryShape, info: TableInfo) -> tuple[QueryShape, CellGrid]:
        """Stages 4-5: the cells (an average is protected as its sums: the shape carries them)."""
        measured = with_sums(shape)
        return measured, self._reader.grid(measured, info)

    def _finest_sensitivity(self, table: Table, info: TableInfo) -> FinestSensitivity | None:
        """The finest cells of ``table`` the rules flag, for the history audit."""
        return finest_flagged(self.policy, table, self.column_types, lambda shape: self._cells(shape, info))

    def _screen(
        self,
        who: Analyst,
        front: FrontResult,
        info: TableInfo,
        result: ProtectedResult,
        measured: QueryShape,
        grid: CellGrid,
        order: Sequence[int],
        sets: Sequence[SpaceCells] | None,
    ) -> Screened:
        """Stage 6c: what the history audit withholds of ``result`` (nothing when it is off)."""
        if self.history is None or sets is None:
            return Screened(None)
        shape = front.shape
        return self.history.screen(who.name, shape, front.table, info, result, sets, grid, order, measured)

    def _internal(self, request: _Request, error: Exception) -> GuardError:
        """Log a fault that no stage raised on purpose and say it as an internal error. The
        fault's own text is neither logged nor shown: it may quote any data the engine read."""
        reason = f"internal error ({type(error).__name__})"
        try:
            log_id = self.recorder.failed(request.facts(), error, reason=reason)
        except GuardError as unlogged:
            return unlogged  # the store failed too: say that, it is what must be fixed
        return InternalError(f"{reason}; the request is logged as #{log_id}: report it to the data steward")

    def rejected_at_endpoint(self, analyst: str, text: str, error: GuardError) -> None:
        """Log an analyst's request an endpoint refused before :meth:`query` could read it
        (text that is not UTF-8, a body that is not a query): bad input is logged too."""
        self.recorder.failed(RequestFacts(analyst, text, time.perf_counter()), error)

    def failed_login(self, endpoint: str, user: str | None, address: str) -> None:
        """Log a failed login at an endpoint (the endpoints' default failed-login hook)."""
        self.recorder.failed_login(endpoint, user, address)

    def budget(self, analyst: str | None = None) -> dict[str, Any]:
        """Privacy budgets (limit, spent, remaining per account) and every charge with
        the query it paid for; only ``analyst``'s own and shared accounts when given.

        Raises:
            AccessDenied: ``analyst`` is not declared.
            NoBudgets: the policy has no noise mode (there are no budgets; a PolicyError).
        """
        if analyst is not None:
            self._analyst(analyst)
        if self.noise is None:
            raise NoBudgets(
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
