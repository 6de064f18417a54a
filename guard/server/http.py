"""The HTTP API: ``POST /query``, ``GET /budget``, ``GET /log``, ``GET /health``.

Thin, like the CLI: it authenticates the analyst by bearer token (their password), calls
the library in a worker thread (``Guard.query`` blocks on DuckDB; FastAPI runs ``def``
endpoints in its thread pool, never on the event loop; the asynchronous authentication
sends its PBKDF2 work there too, and waits out a failed login's back-off) and turns
answers and :class:`~guard.errors.GuardError` into responses. Every error body is
``{"status", "error", "reason"}``; :func:`error_response` is the one place a GuardError
becomes an HTTP status (from :func:`guard.errors.codes_for`).

Failed logins are throttled (:mod:`guard.server.throttle`, shared with the PostgreSQL
endpoint) by client address: a bearer token names no user. Request bodies are bounded
before the app reads them (:mod:`guard.server.httplimits`), SQL text by length.
"""

# No ``from __future__ import annotations`` here: FastAPI reads the endpoints' annotations
# at runtime, and they name objects local to create_app (the bearer scheme, the caller).
import contextlib
import datetime as dt
import json
import logging
from collections.abc import Callable, Coroutine, Mapping
from http import HTTPStatus
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from guard import __version__
from guard.core import Guard
from guard.errors import AccessDenied, GuardError, PolicyError, QueryRejected, codes_for
from guard.policy.model import Analyst
from guard.server.arrow import ARROW_STREAM, arrow_available, arrow_stream
from guard.server.auth import Authenticator
from guard.server.httpconn import Doors, error_body
from guard.server.httplimits import RequestLimits
from guard.server.limits import ServeLimits
from guard.server.schema import Answer, BudgetReport, ErrorBody, Health, LogEntry, QueryRequest
from guard.server.serverlog import untrusted
from guard.server.throttle import (
    FailedLoginHook,
    LoginThrottle,
    after_failure,
    ignore_failed_login,
    lockout_message,
)

__all__ = ["create_app", "error_response"]

logger = logging.getLogger(__name__)

#: answers are for the analyst who asked: no proxy or browser may keep a copy
_PRIVATE = {"Cache-Control": "no-store"}
#: every error status the API answers with, for the OpenAPI schema
_ERRORS = {
    400: "QueryRejected: the query's shape is not allowed (the reason says what to change)",
    401: "AccessDenied: missing or wrong bearer token",
    403: "QueryRefused: answering would disclose (the reason names the control)",
    406: "Arrow was asked for but pyarrow is not installed on the server",
    408: "RequestTimeout: the request body did not arrive within the server's start-up timeout",
    413: "RequestEntityTooLarge: the body or the SQL text is longer than the server accepts",
    422: "InvalidRequest: the request is not what this endpoint takes",
    429: "BudgetExhausted: the privacy budget left is smaller than the query's cost; or "
    "TooManyRequests: too many failed logins from this address (see Retry-After)",
    500: "an internal or policy error (no data in the message); PolicyError: e.g. GET /budget "
    "when the policy has no noise mode",
    502: "BackendError: the data engine or the state store failed",
}
_UNAUTHENTICATED = (
    "missing or invalid bearer token: send the header 'Authorization: Bearer <your password>' "
    "(a steward sets it in the policy with guard password)"
)


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {s: {"model": ErrorBody, "description": _ERRORS.get(s, HTTPStatus(s).phrase)} for s in statuses}


def error_response(error: GuardError) -> JSONResponse:
    """``error`` as a JSON response, its status from :func:`codes_for` (the one error
    table; no endpoint overrides it). A 401 says how to authenticate (``WWW-Authenticate``)."""
    code = codes_for(error).http_status
    headers = {"WWW-Authenticate": "Bearer"} if code == HTTPStatus.UNAUTHORIZED else None
    return JSONResponse(error.to_dict(), status_code=code, headers=headers)


def create_app(
    guard: Guard,
    authenticator: Authenticator | None = None,
    *,
    limits: ServeLimits | None = None,
    throttle: LoginThrottle | None = None,
    on_failed_login: FailedLoginHook = ignore_failed_login,
    doors: Doors | None = None,
) -> FastAPI:
    """The API over ``guard`` (which the caller opens and closes). Analysts authenticate
    with the password the policy keeps a verifier of (``analysts.NAME.password``).

    ``limits`` and ``throttle`` default to their safe defaults (a throttle of its own);
    ``on_failed_login("http", None, address)`` runs on a worker thread for each failed
    login (``app.state.on_failed_login``, settable later); ``doors``: the connections of
    an :class:`~guard.server.httpconn.HttpListener`, told when requests start and end.
    """
    auth = authenticator or Authenticator(guard.policy)
    limits = limits or ServeLimits()
    logins = throttle or LoginThrottle()
    app = FastAPI(
        title=f"statguard: {guard.policy.name}",
        version=__version__,
        description="Aggregate SQL in, protected aggregates out. Authenticate with "
        "`Authorization: Bearer <password>`.",
    )
    app.router.route_class = _Route
    app.state.on_failed_login = on_failed_login
    app.add_middleware(
        RequestLimits,
        max_body_bytes=limits.max_body_bytes,
        body_timeout=limits.startup_timeout,
        doors=doors,
    )
    bearer = HTTPBearer(auto_error=False, description="the analyst's password")

    async def analyst(
        request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
    ) -> Analyst:
        if credentials is None:
            raise AccessDenied(_UNAUTHENTICATED)
        address = request.client.host if request.client is not None else "unknown"
        locked = logins.locked(None, address)
        if locked > 0:
            logger.warning("login refused for a bearer token from %s: locked out", address)
            raise StarletteHTTPException(
                HTTPStatus.TOO_MANY_REQUESTS, lockout_message(locked), {"Retry-After": str(int(locked) + 1)}
            )
        # PBKDF2 takes milliseconds: on a worker thread, as the endpoints themselves run
        who = await run_in_threadpool(auth.analyst_for_token, credentials.credentials)
        if who is None:
            delay = logins.failed(None, address)
            logger.warning("login failed for a bearer token from %s", address)
            await after_failure(delay, app.state.on_failed_login, "http", None, address)
            raise AccessDenied(_UNAUTHENTICATED)
        request.state.analyst = who.name  # a body that is no query is logged under them
        return who

    Caller = Annotated[Analyst, Depends(analyst)]

    @app.post(
        "/query",
        response_class=Response,
        responses={
            200: {"model": Answer, "content": {ARROW_STREAM: {}}, "description": "the protected answer"},
            **_errors(400, 401, 403, 406, 408, 413, 422, 429, 500, 502),
        },
    )
    def query(
        body: QueryRequest,
        who: Caller,
        request: Request,
        flags: Annotated[bool, Query(description="same as the body's flags")] = False,
    ) -> Response:
        """Answer one aggregate query, or say why not. The body is exactly
        ``ProtectedResult.to_json()``; with ``Accept: application/vnd.apache.arrow.stream``
        the rows come as an Arrow IPC stream, flags and notes in the schema metadata.
        With ``flags`` (in the body or ``?flags=true``) each aggregate column is followed
        by a text column ``<label>_flag``: released, suppressed or noised."""
        arrow = _accepts_arrow(request.headers.get("accept"))
        if arrow and not arrow_available():
            # said before the query runs: an answer computed and logged but not sent
            # would still be charged to the analyst's budget
            return _plain_error(
                HTTPStatus.NOT_ACCEPTABLE,
                "the server cannot send Arrow (pyarrow is not installed there): ask for application/json",
            )
        if len(body.sql) > limits.max_sql_length:
            logger.warning(
                "refused %d characters of SQL from analyst %s: over --max-sql-length", len(body.sql), who.name
            )
            return _plain_error(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"the SQL text is {len(body.sql)} characters long; this server accepts at most "
                f"{limits.max_sql_length} (guard serve --max-sql-length): send a shorter query",
            )
        result = guard.query(body.sql, who.name, body.parameters)
        if body.flags or flags:
            result = result.with_flag_columns()
        if arrow:
            return Response(arrow_stream(result), media_type=ARROW_STREAM, headers=_PRIVATE)
        return Response(result.to_json(), media_type="application/json", headers=_PRIVATE)

    @app.get(
        "/budget",
        response_class=JSONResponse,
        responses={200: {"model": BudgetReport}, **_errors(401, 429, codes_for(PolicyError).http_status)},
    )
    def budget(who: Caller) -> JSONResponse:
        """The caller's privacy budget (noise mode): their own account, the shared ones
        (groups, global) and their own charges; never another analyst's. A policy without
        noise mode has no budgets: a PolicyError, with the error table's status."""
        return JSONResponse(guard.budget(who.name), headers=_PRIVATE)

    @app.get(
        "/log",
        response_class=JSONResponse,
        responses={200: {"model": list[LogEntry]}, **_errors(401, 422, 429)},
    )
    def log(who: Caller, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> JSONResponse:
        """The caller's own last ``limit`` requests, oldest first, as the guard logged them."""
        entries = [_log_entry(record) for record in guard.log(analyst=who.name, limit=limit)]
        return JSONResponse(entries, headers=_PRIVATE)

    @app.get("/health", response_model=Health)
    async def health() -> Health:
        """Liveness, without authentication: names the policy, nothing else."""
        return Health(status="ok", policy=guard.policy.name)

    _install_error_handlers(app, guard)
    return app


class _Route(APIRoute):
    """A route that answers a bug with a 500 in the error shape and keeps the connection.

    Left to Starlette, an unexpected exception is answered by its outermost middleware and
    then re-raised, and uvicorn drops the connection: the client's next request on it
    fails. Errors with a handler of their own pass through.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except (GuardError, StarletteHTTPException, RequestValidationError):
                raise
            except Exception as error:
                logger.error(
                    "internal error on %s %s", request.method, untrusted(request.url.path), exc_info=error
                )
                return _internal_error(error)

        return answer


def _internal_error(error: Exception) -> Response:
    # its text could hold anything (a value, a path), so only its class is named; the
    # server's log keeps the traceback
    return _plain_error(
        HTTPStatus.INTERNAL_SERVER_ERROR,
        f"internal error ({type(error).__name__}); please report it with the request you sent",
    )


def _install_error_handlers(app: FastAPI, guard: Guard) -> None:
    @app.exception_handler(GuardError)
    async def guard_error(_: Request, error: GuardError) -> JSONResponse:
        return error_response(error)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        reason = _validation_message(error)
        analyst = getattr(request.state, "analyst", None)
        if analyst is not None and request.url.path == "/query":
            # bad input is logged too: its SQL when the body holds one, else the body as sent
            # (bounded by the body limit); the recorder escapes what is not UTF-8
            text = _sql_of(await request.body())
            with contextlib.suppress(GuardError):
                await run_in_threadpool(guard.rejected_at_endpoint, analyst, text, QueryRejected(reason))
        return JSONResponse(
            {"status": "rejected", "error": "InvalidRequest", "reason": reason},
            status_code=HTTPStatus.UNPROCESSABLE_ENTITY,
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> Response:
        reason = f"{request.method} {request.url.path}: {error.detail}"
        if error.status_code in (HTTPStatus.NOT_FOUND, HTTPStatus.METHOD_NOT_ALLOWED):
            reason += "; the API is POST /query, GET /budget, GET /log, GET /health (schema: /openapi.json)"
        return _plain_error(HTTPStatus(error.status_code), reason, error.headers)

    @app.exception_handler(Exception)
    async def internal_error(_: Request, error: Exception) -> Response:
        return _internal_error(error)  # outside any route (a middleware's bug)


def _sql_of(body: bytes) -> str:
    try:
        document = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "backslashreplace")
    sql = document.get("sql") if isinstance(document, dict) else None
    return sql if isinstance(sql, str) else body.decode("utf-8", "backslashreplace")


def _plain_error(status: HTTPStatus, reason: str, headers: Mapping[str, str] | None = None) -> Response:
    """An error that is no GuardError (HTTP-level), in the same body shape."""
    return Response(error_body(status, reason), status.value, headers, media_type="application/json")


def _validation_message(error: RequestValidationError) -> str:
    """What is wrong with the request, per field, without echoing the values sent."""
    problems = []
    for item in error.errors()[:5]:
        where = ".".join(str(part) for part in item.get("loc", ()) if part != "body")
        if item.get("type") == "json_invalid":
            problems.append('the body is not valid JSON: send {"sql": "SELECT ...", "parameters": [...]}')
        else:
            problems.append(f"{where or 'body'}: {item.get('msg', 'invalid')}")
    return "; ".join(problems)


def _accepts_arrow(accept: str | None) -> bool:
    """Whether the Accept header asks for an Arrow stream (listed with a quality above 0).
    Clients that read Arrow ask for it by name; ``*/*`` gets JSON."""
    for part in (accept or "").split(","):
        media, *params = (p.strip().lower() for p in part.split(";"))
        if media != ARROW_STREAM:
            continue
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        return quality > 0
    return False


def _log_entry(record: dict[str, Any]) -> dict[str, Any]:
    """A log record as its analyst may see it: what they sent and got back. Hashes of the
    chain, the data version and the canonical form are the auditor's, not the analyst's."""
    ts: dt.datetime = record["ts"]
    return {
        "id": record["id"],
        "time": ts.replace(tzinfo=dt.UTC).isoformat(timespec="milliseconds"),
        "sql": record["sql"],
        "decision": record["decision"],
        "error": record["error"],
        "reason": record["reason"],
        "columns": record["columns"],
        "rows": record["rows"],
        "flags": record["flags"],
        "notes": record["notes"],
    }
