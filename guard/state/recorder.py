"""Stage 7: one log record per request, built from what the stages returned.

The guard calls the recorder once per request, whatever happened: an answer (with the
released-cell links, history sets and noise charge of that answer, in one transaction
before the answer leaves), a refusal or rejection, an explanation, or an internal error.
Texts that came from outside are stored bounded and encodable, so that no request is
ever lost from the log because of what it contained.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from guard.errors import AccessDenied, GuardError, QueryRefused, QueryRejected
from guard.result import ProtectedResult
from guard.state.commit import Pending
from guard.state.records import HistoryWrite, LogRecord, NoiseWrite, Outcome, Release
from guard.state.store import StateStore

__all__ = ["LOGGED_SQL_LIMIT", "Recorder", "RequestFacts", "logged_text", "outcome_of"]

#: characters of a request's SQL the log keeps by default; longer text is kept as a prefix
#: and the SHA-256 of the whole (a rejected 10 MB query must not grow the store by 10 MB).
#: The guard passes its policy's ``limits.max_sql_length``: every text it accepts (and
#: so every answer an auditor replays) is logged whole.
LOGGED_SQL_LIMIT = 20_000


@dataclass(frozen=True)
class RequestFacts:
    """What the log says of one request besides its outcome."""

    analyst: str
    sql: str
    started: float
    canonical: str | None = None
    data_version: str | None = None


def outcome_of(error: BaseException) -> Outcome:
    """The log outcome of a request that raised ``error``."""
    if isinstance(error, QueryRejected):
        return Outcome.REJECTED
    if isinstance(error, QueryRefused | AccessDenied):  # budget exhaustion is a refusal too
        return Outcome.REFUSED
    return Outcome.ERROR


def logged_text(text: object, limit: int = LOGGED_SQL_LIMIT) -> str:
    """``text`` as the log keeps it: valid UTF-8 (a lone surrogate is escaped, not a
    reason to lose the record) and at most ``limit`` characters plus a digest."""
    if not isinstance(text, str):
        text = repr(text)
    encodable = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(encodable) <= limit:
        return encodable
    digest = hashlib.sha256(encodable.encode("utf-8")).hexdigest()
    return f"{encodable[:limit]}… [{len(encodable)} characters, sha256 {digest}]"


class Recorder:
    """Writes the log records of one guard into its state store."""

    def __init__(self, store: StateStore, sql_limit: int = LOGGED_SQL_LIMIT) -> None:
        self.store = store
        self.sql_limit = sql_limit

    def answered(
        self,
        facts: RequestFacts,
        result: ProtectedResult,
        releases: Sequence[Release] = (),
        noise: NoiseWrite | None = None,
        history: HistoryWrite | None = None,
    ) -> int:
        """Record an answer with everything it adds to the store, in one transaction;
        returns its log id.

        Raises:
            BackendError: the store could not commit (the answer must not leave).
        """
        return self.store.append(_answer(facts, result, self.sql_limit), list(releases), noise, history)

    def answer_queued(
        self,
        facts: RequestFacts,
        result: ProtectedResult,
        releases: Sequence[Release] = (),
        history: HistoryWrite | None = None,
    ) -> Pending:
        """Queue an answer's record with everything it adds to the store for the next
        commit, its place in the log fixed now; the answer must not leave before
        ``StateStore.wait`` returned its log id (group commit: ``commit.py``)."""
        return self.store.queue(_answer(facts, result, self.sql_limit), list(releases), None, history)

    def post_processed(self, facts: RequestFacts, result: ProtectedResult, inner: Sequence[int]) -> int:
        """Record the answer of a query over protected answers: what it released, and the
        log ids of the inner queries it was computed from (each logged as answered).
        It adds nothing to the history: it reveals nothing they did not. Returns its log id."""
        return self.store.append(
            LogRecord(
                analyst=logged_text(facts.analyst),
                sql=logged_text(facts.sql, self.sql_limit),
                decision=Outcome.POST_PROCESSED,
                canonical=json.dumps({"computed_from": list(inner)}, separators=(",", ":")),
                data_version=facts.data_version,
                columns=list(result.columns),
                rows=result.logged_rows(),
                flags=[list(row) for row in result.flags],
                notes=list(result.notes),
                elapsed_ms=_elapsed(facts),
                levels=result.logged_levels(),
            )
        )

    def explained(self, facts: RequestFacts, result: ProtectedResult) -> None:
        """Record a ``guard explain`` request: its notes, no released value."""
        self.store.append(
            LogRecord(
                analyst=logged_text(facts.analyst),
                sql=logged_text(facts.sql, self.sql_limit),
                decision=Outcome.EXPLAINED,
                canonical=facts.canonical,
                data_version=facts.data_version,
                notes=list(result.notes),
                elapsed_ms=_elapsed(facts),
            )
        )

    def failed_login(self, endpoint: str, user: str | None, address: str) -> int:
        """Record a failed login (the user name as the client sent it, bounded: it may
        name nobody) and return its log id."""
        return self.store.append(
            LogRecord(
                analyst=logged_text(user if user is not None else "(bearer token)", 200),
                sql="",
                decision=Outcome.LOGIN_FAILED,
                error="AccessDenied",
                reason=logged_text(f"failed login on the {endpoint} endpoint from {address}", 400),
            )
        )

    def failed(self, facts: RequestFacts, error: BaseException, reason: str | None = None) -> int:
        """Record a request that ended in ``error`` (refused, rejected, failed) and return
        its log id. ``reason`` replaces the message of an error that is not a
        :class:`GuardError` (its text may hold anything: it is not logged)."""
        kind = error.kind if isinstance(error, GuardError) else "InternalError"
        message = error.message if isinstance(error, GuardError) else reason
        return self.store.append(
            LogRecord(
                analyst=logged_text(facts.analyst),
                sql=logged_text(facts.sql, self.sql_limit),
                decision=outcome_of(error),
                canonical=facts.canonical,
                data_version=facts.data_version,
                error=kind,
                reason=None if message is None else logged_text(message),
                elapsed_ms=_elapsed(facts),
            )
        )


def _answer(facts: RequestFacts, result: ProtectedResult, sql_limit: int) -> LogRecord:
    return LogRecord(
        analyst=logged_text(facts.analyst),
        sql=logged_text(facts.sql, sql_limit),
        decision=Outcome.ANSWERED,
        canonical=facts.canonical,
        data_version=facts.data_version,
        columns=list(result.columns),
        rows=result.logged_rows(),
        flags=[list(row) for row in result.flags],
        notes=list(result.notes),
        elapsed_ms=_elapsed(facts),
        levels=result.logged_levels(),
    )


def _elapsed(facts: RequestFacts) -> float:
    return (time.perf_counter() - facts.started) * 1000
