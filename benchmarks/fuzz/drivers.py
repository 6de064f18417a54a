"""How a fuzzed statement reaches the guard: in-process, over HTTP, over PostgreSQL.

Each driver sends one statement, tagged ``/* fuzz N */`` at the front, and returns a
:class:`Reply`: the outcome, whether it is an internal error, every message the client
saw (error text, notes, notices) and whether the request must leave a log row. That last
one is decided from the request alone (not from the answer): over HTTP every request with
valid JSON and SQL within ``--max-sql-length`` reaches ``Guard.query``; over PostgreSQL
the endpoint's own statement splitter, classifier and router say whether the first
statement goes to the guard (session commands and catalog probes are answered by the
endpoint and are not logged, by design).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg
from psycopg import pq

from benchmarks.fuzz.grammar import Fuzzed
from benchmarks.fuzz.serve import pg_address
from guard import Guard, GuardError
from guard.server.pgwire.answers import GuardPlan, route
from guard.server.pgwire.sqlstate import SqlError
from guard.server.pgwire.statements import Kind, classify, split

__all__ = ["PASSWORDS", "SERVE_MAX_SQL", "HttpDriver", "InProcess", "PgDriver", "Reply", "tag"]

PASSWORDS = {"alice": "alice-demo", "bob": "bob-demo"}
#: guard serve's default --max-sql-length: longer text is refused before it is logged
SERVE_MAX_SQL = 100_000


def tag(number: int) -> str:
    return f"/* fuzz {number} */ "


@dataclass
class Reply:
    #: answered, or the error's kind / HTTP status / SQLSTATE
    outcome: str
    internal: bool = False
    messages: list[str] = field(default_factory=list)
    #: True: the request must have a log row; False: it must not reach the guard;
    #: None: cannot tell from the request
    expect_log: bool | None = True
    #: the class of a non-GuardError, a transport error's text
    detail: str = ""


class InProcess:
    """``Guard.query`` itself; analysts take turns."""

    name = "in-process"

    def __init__(self, guard: Guard, analysts: Sequence[str] = ("alice", "bob")) -> None:
        self.guard = guard
        self.analysts = analysts

    def send(self, number: int, fuzzed: Fuzzed) -> Reply:
        analyst = self.analysts[number % len(self.analysts)]
        params = list(fuzzed.parameters) if fuzzed.parameters is not None else None
        try:
            result = self.guard.query(tag(number) + fuzzed.sql, analyst, params)
        except GuardError as error:
            internal = error.kind == "InternalError"
            return Reply(error.kind, internal, [error.message], detail=_cause(error))
        except Exception as error:  # the finding the harness is for
            return Reply("exception", True, [str(error)], detail=f"{type(error).__name__}: {error}"[:300])
        return Reply("answered", False, list(result.notes))

    def close(self) -> None:
        pass


def _cause(error: GuardError) -> str:
    cause = error.__cause__
    return f"{type(cause).__name__}: {cause}"[:300] if cause is not None else ""


# --- HTTP --------------------------------------------------------------------------------

_HTTP_OUTCOMES = {200: "answered", 400: "rejected", 401: "denied", 403: "refused", 429: "refused"}


def _json_scalar(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, bool | int | str)


class HttpDriver:
    """``POST /query`` with the analyst's bearer token (one kept-alive connection each)."""

    name = "http"

    def __init__(self, url: str, analysts: Sequence[str] = ("alice", "bob")) -> None:
        self.analysts = analysts
        self.clients = {
            a: httpx.Client(base_url=url, timeout=120, headers={"Authorization": f"Bearer {PASSWORDS[a]}"})
            for a in analysts
        }

    def send(self, number: int, fuzzed: Fuzzed) -> Reply:
        client = self.clients[self.analysts[number % len(self.analysts)]]
        sql = tag(number) + fuzzed.sql
        payload: dict[str, Any] = {"sql": sql}
        expect = len(sql) <= SERVE_MAX_SQL
        if fuzzed.parameters is not None:
            payload["parameters"] = list(fuzzed.parameters)
            expect = expect and all(_json_scalar(v) for v in fuzzed.parameters)
        # json.dumps escapes lone surrogates (\udXXX); NaN goes out as invalid JSON (422)
        body = json.dumps(payload, default=repr).encode()
        try:
            response = client.post("/query", content=body, headers={"Content-Type": "application/json"})
        except httpx.HTTPError as error:
            return Reply("transport", True, expect_log=None, detail=f"{type(error).__name__}: {error}"[:300])
        status = response.status_code
        try:
            document = response.json()
        except ValueError:
            document = {"reason": response.text}
        messages = [str(document.get("reason", ""))] if "reason" in document else []
        messages += [str(n) for n in document.get("notes", [])]
        outcome = _HTTP_OUTCOMES.get(status, str(status))
        return Reply(outcome, status == 500, messages, expect, detail=str(document.get("error", "")))

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


# --- PostgreSQL ----------------------------------------------------------------------------


def _wire_bytes(text: str) -> bytes:
    """What a client puts on the wire for ``text``: UTF-8, surrogates passed through as
    the bytes they stand for, cut at the first NUL (libpq sends C strings)."""
    try:
        data = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        data = text.encode("utf-8", "surrogatepass")
    return data.split(b"\x00", 1)[0]


def _pg_expects_log(data: bytes, with_parameters: bool) -> bool | None:
    """Whether the endpoint hands this text to ``Guard.query`` (from its own splitter,
    classifier and router); a crash in routing counts as "yes": the request is lost."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False  # refused as a protocol violation before any statement
    if len(text) > SERVE_MAX_SQL:
        return False
    try:
        pieces = split(text)
        if not pieces or (with_parameters and len(pieces) > 1):
            return False
        statement = classify(pieces[0])
    except SqlError:
        return False
    except Exception:
        return True
    if statement.kind is Kind.OTHER:
        return True
    if statement.kind is not Kind.QUERY:
        return False
    try:
        return isinstance(route(pieces[0]), GuardPlan)
    except Exception:
        return True


def _parameter_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, bool):
        return b"true" if value else b"false"
    return _wire_bytes(str(value))


class PgDriver:
    """One psycopg 3 connection per analyst; statements without parameters go by the
    simple query protocol (``PQexec``), with parameters by ``PQexecParams``."""

    name = "postgresql"

    def __init__(self, url: str, analysts: Sequence[str] = ("alice", "bob")) -> None:
        self.address = pg_address(url)
        self.analysts = analysts
        self.connections: dict[str, psycopg.Connection[Any]] = {}
        self.notices: list[str] = []
        self.reconnects = 0

    def _connection(self, analyst: str) -> psycopg.Connection[Any]:
        connection = self.connections.get(analyst)
        if connection is None or connection.pgconn.status != pq.ConnStatus.OK:
            if connection is not None:
                connection.close()
                self.reconnects += 1
            connection = psycopg.connect(
                **self.address,  # type: ignore[arg-type]
                user=analyst,
                password=PASSWORDS[analyst],
                sslmode="disable",  # loopback
                autocommit=True,
                connect_timeout=30,
            )
            connection.add_notice_handler(lambda d: self.notices.append(d.message_primary or ""))
            self.connections[analyst] = connection
        return connection

    def send(self, number: int, fuzzed: Fuzzed) -> Reply:
        analyst = self.analysts[number % len(self.analysts)]
        pgconn = self._connection(analyst).pgconn
        data = _wire_bytes(tag(number) + fuzzed.sql)
        params = fuzzed.parameters
        expect = _pg_expects_log(data, params is not None)
        self.notices.clear()
        try:
            if params is None:
                result = pgconn.exec_(data)
            else:
                values = [_parameter_bytes(v) for v in params]
                if any(v is not None and not _utf8(v) for v in values):
                    expect = None
                result = pgconn.exec_params(data, values)
        except psycopg.Error as error:  # libpq returned no result at all
            return Reply(
                "dropped", True, list(self.notices), expect, detail=f"{type(error).__name__}: {error}"
            )
        reply = _reply(result, pgconn.status != pq.ConnStatus.OK, list(self.notices), expect)
        if pgconn.status == pq.ConnStatus.OK and pgconn.transaction_status != pq.TransactionStatus.IDLE:
            pgconn.exec_(b"ROLLBACK")  # a fuzzed BEGIN must not hold the next request
        return reply

    def close(self) -> None:
        for connection in self.connections.values():
            connection.close()


def _reply(result: pq.abc.PGresult, dropped: bool, messages: list[str], expect: bool | None) -> Reply:
    if result.status != pq.ExecStatus.FATAL_ERROR:
        return (
            Reply("dropped", True, messages, expect)
            if dropped
            else Reply("answered", False, messages, expect)
        )
    sqlstate = (result.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode()
    primary = (result.error_field(pq.DiagnosticField.MESSAGE_PRIMARY) or b"").decode(errors="replace")
    if not sqlstate:  # libpq's own error: the server went away without a word
        return Reply("dropped", True, [*messages, primary], expect, detail=primary[:300])
    outcome = f"{sqlstate} (connection closed)" if dropped else sqlstate
    return Reply(outcome, sqlstate == "XX000", [*messages, primary], expect, detail=primary[:300])


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
