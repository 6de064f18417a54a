"""Failed-login throttling: back-off, lockout, forgetting, and what it keeps in memory."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from guard.server import throttle as throttle_module
from guard.server.throttle import LoginThrottle, ThrottleSettings, after_failure, lockout_message


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def throttle(clock: Clock, **settings: float) -> LoginThrottle:
    return LoginThrottle(ThrottleSettings(**settings), clock=clock)  # type: ignore[arg-type]


def test_back_off_doubles_up_to_the_cap_then_locks_out(clock: Clock) -> None:
    logins = throttle(clock, max_failures=5, backoff=0.25, backoff_cap=1.0, lockout=60)
    delays = [logins.failed("alice", "10.0.0.1") for _ in range(4)]
    assert delays == [0.25, 0.5, 1.0, 1.0]
    assert logins.locked("alice", "10.0.0.1") == 0.0
    logins.failed("alice", "10.0.0.1")  # the fifth
    assert logins.locked("alice", "10.0.0.1") == 60.0
    clock.now += 59
    assert logins.locked("alice", "10.0.0.1") == pytest.approx(1.0)
    clock.now += 1
    assert logins.locked("alice", "10.0.0.1") == 0.0
    assert logins.failed("alice", "10.0.0.1") == 0.25  # the lockout over, counting starts again
    assert (logins.failed_logins, logins.locked_out_attempts) == (6, 2)


def test_a_name_and_an_address_lock_out_separately(clock: Clock) -> None:
    logins = throttle(clock, max_failures=3)
    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):  # one name, from three places
        logins.failed("alice", address)
    assert logins.locked("alice", "10.0.0.9") > 0  # the name, from anywhere
    assert logins.locked("bob", "10.0.0.1") == 0.0  # the addresses are not locked
    for name in ("carol", "dave", "erin"):  # three names, from one place
        logins.failed(name, "10.0.0.5")
    assert logins.locked("bob", "10.0.0.5") > 0  # the address, whatever the name
    assert logins.locked(None, "10.0.0.5") > 0  # a bearer token names no one: the address alone
    assert logins.locked(None, "10.0.0.6") == 0.0


def test_an_unknown_name_is_throttled_exactly_as_a_known_one(clock: Clock) -> None:
    # the throttle never asks the policy: a name that exists cannot be told from one that does not
    known, unknown = throttle(clock), throttle(clock)
    assert [known.failed("alice", "10.0.0.1") for _ in range(5)] == [
        unknown.failed("no-such-analyst", "10.0.0.1") for _ in range(5)
    ]
    assert known.locked("alice", "10.0.0.1") == unknown.locked("no-such-analyst", "10.0.0.1")


def test_failures_are_forgotten_after_a_quiet_lockout_period(clock: Clock) -> None:
    logins = throttle(clock, max_failures=3, lockout=60)
    logins.failed("alice", "10.0.0.1")
    logins.failed("alice", "10.0.0.1")
    clock.now += 61
    assert logins.failed("alice", "10.0.0.1") == 0.25  # the first of a new run
    assert logins.locked("alice", "10.0.0.1") == 0.0


def test_success_clears_the_name_but_not_the_address(clock: Clock) -> None:
    logins = throttle(clock, max_failures=3)
    logins.failed("alice", "10.0.0.1")
    logins.failed("alice", "10.0.0.1")
    logins.succeeded("alice")
    # the name starts again; the address still has two failures, so the next one locks it
    logins.failed("bob", "10.0.0.1")
    assert logins.locked("alice", "10.0.0.2") == 0.0
    assert logins.locked("alice", "10.0.0.1") > 0


def test_no_lockout_and_no_delay_when_turned_off(clock: Clock) -> None:
    logins = throttle(clock, max_failures=0, backoff=0)
    assert {logins.failed("alice", "10.0.0.1") for _ in range(50)} == {0.0}
    assert logins.locked("alice", "10.0.0.1") == 0.0


def test_names_are_kept_as_digests_in_a_bounded_table(clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(throttle_module, "_TABLE_SIZE", 10)
    logins = throttle(clock)
    huge = "x" * 10_000
    logins.failed(huge, "10.0.0.1")
    assert all(len(key) < 64 for key in logins._records)
    assert huge.encode()[:100] not in b"".join(logins._records)
    for n in range(100):
        logins.failed(f"guess-{n}", "10.0.0.1")
    assert len(logins._records) <= 10


def test_settings_must_make_sense() -> None:
    with pytest.raises(ValueError, match="negative"):
        ThrottleSettings(backoff=-1)
    with pytest.raises(ValueError, match="lockout must be positive"):
        ThrottleSettings(lockout=0)


def test_lockout_message_names_no_one() -> None:
    assert lockout_message(12.2) == (
        "too many failed logins for this user name or from this address: try again in 13 s"
    )


def test_after_failure_waits_without_holding_the_loop_and_calls_the_hook_on_a_thread() -> None:
    calls: list[tuple[str, str | None, str, bool]] = []
    loop_thread = threading.get_ident()

    def hook(endpoint: str, user: str | None, address: str) -> None:
        time.sleep(0.3)  # e.g. a write to the query log
        calls.append((endpoint, user, address, threading.get_ident() != loop_thread))

    async def main() -> tuple[float, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        tick = asyncio.create_task(ticker())
        started = time.monotonic()
        await after_failure(0.5, hook, "postgresql", "m" * 5000, "10.0.0.1")
        tick.cancel()
        return time.monotonic() - started, ticks

    took, ticks = asyncio.run(main())
    assert 0.5 <= took < 0.75  # the delay and the hook overlap (one after the other: 0.8 s)
    assert ticks >= 10  # the loop went on meanwhile
    assert calls == [("postgresql", "m" * 200, "10.0.0.1", True)]


def test_a_failing_hook_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    def hook(endpoint: str, user: str | None, address: str) -> None:
        raise RuntimeError("query log unavailable")

    asyncio.run(after_failure(0, hook, "http", None, "10.0.0.1"))
    assert "the failed-login hook failed" in caplog.text
