"""The Guard: one policy, one locked-down backend, one state store, one query path."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from guard.backends.base import Backend, TableInfo
from guard.backends.duckdb_backend import DuckDBBackend
from guard.cells import cells_from_result
from guard.errors import AccessDenied, GuardError
from guard.policy.load import load_policy
from guard.policy.model import Analyst, Policy
from guard.protect import protect
from guard.query.analyze import analyze
from guard.query.parse import parse
from guard.query.rewrite import rewrite
from guard.query.shape import QueryShape
from guard.query.validate import validate
from guard.result import ProtectedResult
from guard.state.store import LogRecord, StateStore

__all__ = ["Guard"]


class Guard:
    """Answers aggregate SQL with protected aggregates, for the analysts of one policy.

    Thread-safe: the server calls :meth:`query` from many threads at once.
    """

    def __init__(self, policy: Policy, backend: Backend, store: StateStore) -> None:
        self.policy = policy
        self.backend = backend
        self.store = store

    @classmethod
    def open(cls, policy_path: str | Path, state: str | Path | None = None) -> Guard:
        """Load the policy, open its data read-only and its state store.

        ``state`` overrides the policy's state folder (log, history, budgets).

        Raises:
            PolicyError: the policy or its sources are invalid.
            BackendError: the data or the state store cannot be opened.
        """
        policy = load_policy(policy_path, state)
        store = StateStore(policy.state_dir)
        try:
            backend = DuckDBBackend(policy)
        except BaseException:
            store.close()
            raise
        return cls(policy, backend, store)

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self.backend.close()
        self.store.close()

    def query(self, sql: str, analyst: str) -> ProtectedResult:
        """Answer ``sql`` for ``analyst``, or raise why not.

        Every request, answered or not, is logged before this returns or raises.

        Raises:
            AccessDenied: unknown analyst, or a table the analyst may not query.
            QueryRejected: the SQL's shape is not allowed (the message says what to change).
            QueryRefused: answering would disclose (the message names the control).
            BackendError: the engine or the state store failed.
        """
        started = time.perf_counter()
        shape: QueryShape | None = None
        info: TableInfo | None = None
        try:
            who = self._analyst(analyst)
            tree = parse(sql, self.policy.limits)  # 1 parse
            visible = tuple(t for t in self.policy.tables if who.may_query(t.name))
            select, table = validate(tree, visible)  # 2 validate
            info = self.backend.table_info(table.name)
            shape = analyze(select, table, info.types, self.policy.limits)  # 3 analyze
            plan = rewrite(shape, info)  # 5 rewrite
            grid = cells_from_result(shape, plan, self.backend.execute(plan.query), info)  # 6
            result = protect(shape, grid, self.policy.protection)  # 7 protect
        except GuardError as error:
            self._record_refusal(analyst, sql, error, shape, info, started)
            raise
        self._record_answer(analyst, sql, result, shape, info, started)  # 8 record
        return result  # 9 answer

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
    ) -> None:
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
            )
        )

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
        }.get(type(error).__name__, "refused")
        self.store.append(
            LogRecord(
                analyst=str(analyst),
                sql=sql if isinstance(sql, str) else repr(sql),
                decision=decision,
                canonical=shape.canonical if shape else None,
                data_version=info.data_version if info else None,
                error=type(error).__name__,
                reason=error.message,
                elapsed_ms=(time.perf_counter() - started) * 1000,
            )
        )
