"""Connections to PostgreSQL for the back-end: opened from a policy's dsn, with errors
that never repeat a password and never quote row values."""

from __future__ import annotations

import contextlib
import re

import psycopg

from guard.backends.postgres_types import Connection
from guard.errors import BackendError, PolicyError
from guard.policy.model import Policy

__all__ = ["connect", "first_line"]


def connect(dsn: str, policy: Policy, key: str) -> Connection:
    """An autocommit connection to ``dsn`` (the policy's ``key``).

    Raises PolicyError for a malformed dsn, BackendError when the server cannot be
    reached; neither message repeats the dsn's password.
    """
    try:
        return psycopg.connect(dsn, autocommit=True)
    except psycopg.ProgrammingError:
        # psycopg quotes the whole malformed string, password included
        raise PolicyError(
            f"{policy.path.name}: {key}: not a valid libpq connection string or postgresql:// URI"
        ) from None
    except psycopg.Error as exc:
        raise BackendError(f"cannot connect to postgres ({key}): {_scrub(first_line(exc), dsn)}") from None


def _scrub(message: str, dsn: str) -> str:
    """``message`` without the dsn's password, in case the server or libpq echoes it."""
    with contextlib.suppress(psycopg.Error):
        password = psycopg.conninfo.conninfo_to_dict(dsn).get("password")
        if password:
            message = message.replace(str(password), "***")
    message = re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", message)
    return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", message)


def first_line(exc: psycopg.Error) -> str:
    # the primary message only: DETAIL lines may quote row values
    primary = exc.diag.message_primary if exc.diag is not None else None
    return (primary or str(exc) or type(exc).__name__).splitlines()[0]
