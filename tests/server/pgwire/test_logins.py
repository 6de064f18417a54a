"""Failed PostgreSQL logins: back-off, lockout, nothing told about who exists, counted."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from guard.server.throttle import LoginThrottle, ThrottleSettings


def _timed(action: Callable[[], Any]) -> tuple[Any, float]:
    started = time.monotonic()
    result = action()
    return result, time.monotonic() - started


@pytest.fixture
def throttled(serve: Callable[..., Any]) -> Any:
    """A server that locks out after 3 failures, backing off 0.2 s, 0.4 s."""
    calls: list[tuple[str, str | None, str]] = []
    settings = ThrottleSettings(max_failures=3, backoff=0.2, backoff_cap=1.0, lockout=60)
    endpoint = serve("students", throttle=LoginThrottle(settings))
    endpoint.server.on_failed_login = lambda *args: calls.append(args)
    endpoint.calls = calls
    return endpoint


def test_failed_logins_back_off_then_lock_out(throttled: Any, wire: Callable[..., Any]) -> None:
    first, took_first = _timed(lambda: wire(throttled, login=False).startup("alice", "guess-1"))
    second, took_second = _timed(lambda: wire(throttled, login=False).startup("alice", "guess-2"))
    assert first.errors()[0]["C"] == second.errors()[0]["C"] == "28P01"
    assert 0.2 <= took_first < 0.4 + 0.3 and 0.4 <= took_second < 0.8 + 0.3
    wire(throttled, login=False).startup("alice", "guess-3")
    # locked: even the right password is refused, before any password is asked for
    locked, took = _timed(lambda: wire(throttled, login=False).startup("alice", "alice-demo"))
    assert locked.kinds() == b"E" and locked.errors()[0]["C"] == "28000"
    assert "too many failed logins" in locked.errors()[0]["M"] and took < 0.5
    assert throttled.server.throttle.failed_logins == 3
    assert throttled.server.throttle.locked_out_attempts == 1
    assert throttled.calls == [("postgresql", "alice", "127.0.0.1")] * 3
    assert throttled.log_size() == 0


def test_an_unknown_user_fails_exactly_like_a_wrong_password(
    serve: Callable[..., Any], wire: Callable[..., Any]
) -> None:
    replies = {}
    for user in ("alice", "mallory"):
        # a server each, so both are a first failure with the same back-off
        endpoint = serve("students", throttle=LoginThrottle(ThrottleSettings(backoff=0.3)))
        reply, took = _timed(lambda: wire(endpoint, login=False).startup(user, "guess"))  # noqa: B023
        error = reply.errors()[0]
        # the timing class: the back-off, plus well under its length of work
        replies[user] = (reply.kinds(), error["C"], error["M"].replace(user, "?"), 0.3 <= took < 0.9)
    assert (
        replies["alice"]
        == replies["mallory"]
        == (b"E", "28P01", 'password authentication failed for user "?"', True)
    )


def test_the_delay_does_not_hold_up_other_clients(
    serve: Callable[..., Any], wire: Callable[..., Any]
) -> None:
    endpoint = serve("students", throttle=LoginThrottle(ThrottleSettings(backoff=2.0)))
    failing = threading.Thread(target=lambda: wire(endpoint, login=False).startup("bob", "guess"))
    failing.start()
    try:
        time.sleep(0.3)  # the failed login is waiting out its 2 s

        def log_in_and_ask() -> Any:
            with psycopg.connect(endpoint.dsn(user="alice"), autocommit=True) as conn:
                return conn.execute("SELECT COUNT(*) FROM students").fetchone()

        answer, took = _timed(log_in_and_ask)
        assert answer == (9,) and took < 1.0
    finally:
        failing.join(10)


def test_a_huge_user_name_is_refused_and_the_hook_gets_it_cut(
    throttled: Any, wire: Callable[..., Any]
) -> None:
    name = "m" * 9_000
    reply = wire(throttled, login=False).startup(name, "guess")
    assert reply.errors()[0]["C"] == "28P01"
    assert throttled.calls == [("postgresql", "m" * 200, "127.0.0.1")]
    assert wire(throttled).query("SELECT COUNT(*) FROM students").rows() == [[b"9"]]
