"""The endpoints' resource limits, declared once: name, default, unit and help.

``guard serve`` turns every field of :class:`ServeLimits` (and of
:class:`guard.server.throttle.ThrottleSettings`) into an option from its metadata, so
the defaults below are the ones an operator gets and reads in ``--help``. They are safe
for a server on a network: a client can hold a connection only so long without logging
in or sending a complete request, and no request is read beyond its limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["PG_WORKERS", "ServeLimits", "option_name", "setting"]

#: threads the PostgreSQL endpoint answers queries on. A request holds its thread until
#: its log record is committed (group commit: ``guard/state/commit.py``), so the threads
#: bound the records one commit can carry: with 8 threads and 16 clients, each request
#: waited ~19 ms for commits of ~3 records and the endpoint stalled at ~380 queries/s
#: on 2 cores; with more threads than clients, commits carry ~7 and it reached ~600
#: (benchmarks/RESULTS.md, issue 17). The HTTP endpoint's thread pool (anyio's) has 40.
PG_WORKERS = 32


def setting(default: Any, option: str, help: str, *, minimum: float = 0) -> Any:
    """A field with its ``guard serve`` option (``--option``), help and smallest value."""
    return field(default=default, metadata={"option": option, "help": help, "minimum": minimum})


def option_name(field_metadata: Any) -> str:
    """The ``--option`` of a field declared with :func:`setting`."""
    return f"--{field_metadata['option']}"


@dataclass(frozen=True)
class ServeLimits:
    """What one client may take of the server. Lengths in characters, sizes in bytes,
    times in seconds."""

    max_sql_length: int = setting(
        100_000,
        "max-sql-length",
        "Longest SQL text (characters) either endpoint reads; longer is refused before it is "
        "parsed or logged (PostgreSQL 54000, HTTP 413). The policy's limits.max_sql_length, "
        "usually smaller, still applies and is logged.",
        minimum=1,
    )
    max_body_bytes: int = setting(
        1_048_576,
        "max-body-bytes",
        "Largest HTTP request body; a larger Content-Length is refused (413) before the body "
        "is read, a chunked body is cut off at the limit.",
        minimum=1,
    )
    max_connections: int = setting(
        100,
        "max-connections",
        "Open connections each endpoint holds at once, logged in or not (PostgreSQL: 53300 "
        "'too many clients'; HTTP: 503).",
        minimum=1,
    )
    max_connections_per_analyst: int = setting(
        20,
        "max-connections-per-analyst",
        "PostgreSQL sessions one analyst may hold at once (53300 beyond it): room for a "
        "client's connection pool (SQLAlchemy's default holds up to 15) and a tool or two.",
        minimum=1,
    )
    startup_timeout: float = setting(
        10.0,
        "startup-timeout",
        "Seconds a client has to finish TLS, start-up and login (PostgreSQL), or to send a "
        "complete request (HTTP); slower connections are closed.",
        minimum=0.1,
    )
    idle_timeout: float = setting(
        3600.0,
        "idle-timeout",
        "Seconds a logged-in PostgreSQL session may send nothing before it is closed (57P05); "
        "HTTP closes idle kept-alive connections after at most 5 s.",
        minimum=1,
    )

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if value <= 0:
                raise ValueError(f"{name}={value}: must be positive")
