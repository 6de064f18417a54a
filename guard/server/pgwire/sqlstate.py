"""Errors the endpoint raises itself (protocol, session and catalog), with their SQLSTATEs.

The guard's own refusals keep their codes from :func:`guard.errors.codes_for`; these are
the PostgreSQL conditions that only exist at the wire: a malformed message, a value that
does not parse as its declared type, an unknown setting, a cancelled statement.
"""

from __future__ import annotations

__all__ = [
    "ACTIVE_TRANSACTION",
    "ADMIN_SHUTDOWN",
    "CANT_CHANGE_RUNTIME_PARAM",
    "DUPLICATE_CURSOR",
    "DUPLICATE_PREPARED_STATEMENT",
    "FEATURE_NOT_SUPPORTED",
    "IDLE_SESSION_TIMEOUT",
    "INSUFFICIENT_PRIVILEGE",
    "INTERNAL_ERROR",
    "INVALID_AUTHORIZATION",
    "INVALID_BINARY_REPRESENTATION",
    "INVALID_CATALOG_NAME",
    "INVALID_CURSOR_NAME",
    "INVALID_PARAMETER_VALUE",
    "INVALID_PASSWORD",
    "INVALID_PREPARED_STATEMENT",
    "INVALID_TEXT_REPRESENTATION",
    "IN_FAILED_TRANSACTION",
    "NO_ACTIVE_TRANSACTION",
    "NULL_VALUE_NOT_ALLOWED",
    "NUMERIC_VALUE_OUT_OF_RANGE",
    "PROGRAM_LIMIT_EXCEEDED",
    "PROTOCOL_VIOLATION",
    "QUERY_CANCELED",
    "SYNTAX_ERROR",
    "TOO_MANY_CONNECTIONS",
    "UNDEFINED_COLUMN",
    "UNDEFINED_FUNCTION",
    "UNDEFINED_OBJECT",
    "UNDEFINED_TABLE",
    "SqlError",
]

ACTIVE_TRANSACTION = "25001"
ADMIN_SHUTDOWN = "57P01"
CANT_CHANGE_RUNTIME_PARAM = "55P02"
DUPLICATE_CURSOR = "42P03"
DUPLICATE_PREPARED_STATEMENT = "42P05"
FEATURE_NOT_SUPPORTED = "0A000"
IDLE_SESSION_TIMEOUT = "57P05"
INSUFFICIENT_PRIVILEGE = "42501"
INTERNAL_ERROR = "XX000"
INVALID_AUTHORIZATION = "28000"
INVALID_BINARY_REPRESENTATION = "22P03"
INVALID_CATALOG_NAME = "3D000"
INVALID_CURSOR_NAME = "34000"
CHARACTER_NOT_IN_REPERTOIRE = "22021"
INVALID_PARAMETER_VALUE = "22023"
INVALID_PASSWORD = "28P01"
INVALID_PREPARED_STATEMENT = "26000"
INVALID_TEXT_REPRESENTATION = "22P02"
IN_FAILED_TRANSACTION = "25P02"
NO_ACTIVE_TRANSACTION = "25P01"
NULL_VALUE_NOT_ALLOWED = "22004"
NUMERIC_VALUE_OUT_OF_RANGE = "22003"
PROGRAM_LIMIT_EXCEEDED = "54000"
PROTOCOL_VIOLATION = "08P01"
QUERY_CANCELED = "57014"
SYNTAX_ERROR = "42601"
TOO_MANY_CONNECTIONS = "53300"
UNDEFINED_COLUMN = "42703"
UNDEFINED_FUNCTION = "42883"
UNDEFINED_OBJECT = "42704"
UNDEFINED_TABLE = "42P01"


class SqlError(Exception):
    """An error sent to the client as an ErrorResponse with ``sqlstate``.

    ``fatal`` errors end the connection after the response (start-up failures).
    """

    def __init__(self, sqlstate: str, message: str, *, fatal: bool = False, hint: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.message = message
        self.fatal = fatal
        self.hint = hint
