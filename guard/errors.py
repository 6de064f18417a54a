"""The guard's error hierarchy, and the one place that maps each class to its codes.

Every message says what is wrong, names the offending thing, and says what to change.
No message ever contains a protected value (a measure, a count of a small group, the
identity of a respondent): refusals speak of controls and thresholds only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "AccessDenied",
    "BackendError",
    "BudgetExhausted",
    "ErrorCodes",
    "GuardError",
    "InternalError",
    "NoBudgets",
    "PolicyError",
    "QueryRefused",
    "QueryRejected",
    "codes_for",
]


class GuardError(Exception):
    """Base of every error the guard raises on purpose."""

    #: the JSON ``status`` of a result carrying this error
    status = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def kind(self) -> str:
        """The public name of the error: the nearest class defined here (a subclass
        elsewhere, e.g. the ledger's, refines the error without renaming it)."""
        for cls in type(self).__mro__:
            if cls.__module__ == __name__:
                return cls.__name__
        return "GuardError"  # pragma: no cover - every GuardError has one

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "error": self.kind, "reason": self.message}


class QueryRejected(GuardError):
    """The query's shape is not allowed; the message says what to change."""

    status = "refused"


class QueryRefused(GuardError):
    """The shape is allowed, but answering would disclose; the message names the control."""

    status = "refused"


class BudgetExhausted(QueryRefused):
    """Answering would spend more privacy budget than is left."""


class AccessDenied(GuardError):
    """The analyst is unknown, or may not use this table."""

    status = "refused"


class PolicyError(GuardError):
    """A policy file is invalid. Messages read ``file: key.path: message``."""


class NoBudgets(PolicyError):
    """The policy answers nothing with noise, so it has no privacy budgets to show."""


class BackendError(GuardError):
    """The data engine or the guard's own state store failed."""


class InternalError(GuardError):
    """A fault the guard did not raise on purpose. The request is logged; the message
    names the fault's class and the log row, never its text (which may hold anything)."""


@dataclass(frozen=True)
class ErrorCodes:
    """How one error class surfaces at each edge of the guard."""

    sqlstate: str
    http_status: int
    exit_code: int


# One table, read by the CLI, the HTTP API and the PostgreSQL endpoint alike. Looked up
# along the MRO, so a subclass without its own row inherits its parent's codes.
_CODES: dict[type[GuardError], ErrorCodes] = {
    QueryRejected: ErrorCodes("42000", 400, 3),  # syntax_error_or_access_rule_violation
    QueryRefused: ErrorCodes("42501", 403, 3),  # insufficient_privilege
    BudgetExhausted: ErrorCodes("53400", 429, 3),  # configuration_limit_exceeded
    AccessDenied: ErrorCodes("28000", 401, 3),  # invalid_authorization_specification
    PolicyError: ErrorCodes("F0000", 500, 2),  # config_file_error
    NoBudgets: ErrorCodes("F0000", 404, 2),  # nothing to show: HTTP's "not found"
    BackendError: ErrorCodes("58000", 502, 2),  # system_error
    InternalError: ErrorCodes("XX000", 500, 2),  # internal_error
    GuardError: ErrorCodes("XX000", 500, 2),  # internal_error
}


def codes_for(error: GuardError | type[GuardError]) -> ErrorCodes:
    """The SQLSTATE, HTTP status and CLI exit code of an error (or error class)."""
    cls = error if isinstance(error, type) else type(error)
    for klass in cls.__mro__:
        if klass in _CODES:
            return _CODES[klass]
    raise TypeError(f"{cls.__name__} is not a GuardError")
