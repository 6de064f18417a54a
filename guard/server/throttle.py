"""Failed-login throttling, one object shared by both endpoints: exponential back-off,
then a temporary lockout, per user name and per client address.

A failure counts against the name the client gave, whether or not an analyst has it (so
neither the answer nor its delay tells who exists), and against the client's address.
The k-th failure in a row is answered after ``backoff * 2**(k-1)`` seconds, at most
``backoff_cap``; the ``max_failures``-th locks that name (or address) for ``lockout``
seconds, during which every attempt is refused at once, its password never checked. A
count is forgotten ``lockout`` seconds after its last failure. A successful login clears
its name's count, never its address's: holding one valid account must not let a client
go on guessing other names from the same address.

Names are kept as keyed digests (a fixed size, whatever a client sends) in a bounded
table. Behind a reverse proxy every client has the proxy's address: the per-address
lockout then locks out everyone (turn it off with ``max_failures`` 0, or keep it as a
global brake).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import math
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from guard.server.limits import setting

__all__ = [
    "FailedLoginHook",
    "LoginThrottle",
    "ThrottleSettings",
    "after_failure",
    "ignore_failed_login",
    "lockout_message",
]

log = logging.getLogger(__name__)

#: called once per failed login: (endpoint "postgresql" | "http", the user name sent, cut to
#: 200 characters, or None for a bearer token, the client's address)
FailedLoginHook = Callable[[str, str | None, str], None]

#: names and addresses remembered at once; the least recently failed are forgotten first
_TABLE_SIZE = 10_000
#: characters of a client-chosen user name handed to the hook
USER_CHARS = 200


def ignore_failed_login(endpoint: str, user: str | None, address: str) -> None:
    """The default hook: nothing."""


@dataclass(frozen=True)
class ThrottleSettings:
    """How failed logins slow down and lock out a name or an address (seconds)."""

    max_failures: int = setting(
        5,
        "login-failures",
        "Failed logins in a row (per user name, and per client address) that lock it out for "
        "--login-lockout seconds; 0: never lock out.",
    )
    lockout: float = setting(
        60.0,
        "login-lockout",
        "Seconds a locked-out name or address is refused without its password being checked.",
        minimum=1,
    )
    backoff: float = setting(
        0.25,
        "login-backoff",
        "Seconds before answering the first failed login; each further failure in a row doubles "
        "it (0: answer at once).",
    )
    backoff_cap: float = setting(
        4.0, "login-backoff-cap", "Longest wait before answering a failed login (seconds)."
    )

    def __post_init__(self) -> None:
        if self.max_failures < 0 or self.backoff < 0 or self.backoff_cap < 0 or self.lockout <= 0:
            raise ValueError(f"{self}: counts and times cannot be negative, the lockout must be positive")


@dataclass
class _Record:
    failures: int = 0
    last: float = 0.0
    locked_until: float = 0.0


class LoginThrottle:
    """Counts failed logins; thread-safe (the endpoints may run on different loops)."""

    def __init__(
        self, settings: ThrottleSettings | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings or ThrottleSettings()
        self._clock = clock
        self._key = secrets.token_bytes(32)
        self._records: OrderedDict[bytes, _Record] = OrderedDict()
        self._lock = threading.Lock()
        #: logins whose credentials were checked and failed, since start
        self.failed_logins = 0
        #: attempts refused unchecked because a name or address was locked out
        self.locked_out_attempts = 0

    def locked(self, user: str | None, address: str) -> float:
        """Seconds left of the lockout of ``user`` or ``address`` (the longer); 0.0 when
        neither is locked. A positive answer counts as a refused attempt."""
        now = self._clock()
        with self._lock:
            left = max((r.locked_until - now for r in self._records_of(user, address, now)), default=0.0)
            if left > 0:
                self.locked_out_attempts += 1
                return left
            return 0.0

    def failed(self, user: str | None, address: str) -> float:
        """Count a failed login; the seconds to wait before answering it."""
        settings, now = self.settings, self._clock()
        with self._lock:
            self.failed_logins += 1
            worst = 0
            for key in self._keys(user, address):
                record = self._live(key, now) or _Record()
                record.failures += 1
                record.last = now
                if settings.max_failures and record.failures >= settings.max_failures:
                    record.locked_until = now + settings.lockout
                worst = max(worst, record.failures)
                self._records[key] = record
                self._records.move_to_end(key)
            while len(self._records) > _TABLE_SIZE:
                self._records.popitem(last=False)
        if not settings.backoff:
            return 0.0
        return min(settings.backoff_cap, settings.backoff * 2.0 ** min(worst - 1, 32))

    def succeeded(self, user: str) -> None:
        """A login of ``user`` succeeded: their name's count starts again."""
        with self._lock:
            self._records.pop(self._name_key(user), None)

    def _records_of(self, user: str | None, address: str, now: float) -> list[_Record]:
        return [r for r in (self._live(k, now) for k in self._keys(user, address)) if r is not None]

    def _live(self, key: bytes, now: float) -> _Record | None:
        """The key's record, unless it is forgotten (no failure for ``lockout`` seconds and
        no lockout running)."""
        record = self._records.get(key)
        if record is None:
            return None
        if now - record.last >= self.settings.lockout and now >= record.locked_until:
            del self._records[key]
            return None
        return record

    def _keys(self, user: str | None, address: str) -> list[bytes]:
        keys = [b"a:" + address.encode("utf-8", "replace")[:64]]
        if user is not None:
            keys.append(self._name_key(user))
        return keys

    def _name_key(self, user: str) -> bytes:
        return b"u:" + hmac.new(self._key, user.encode("utf-8", "replace"), hashlib.sha256).digest()


def lockout_message(seconds: float) -> str:
    """What a locked-out client is told (it says nothing of who exists)."""
    return (
        f"too many failed logins for this user name or from this address: try again in {math.ceil(seconds)} s"
    )


async def after_failure(
    delay: float, hook: FailedLoginHook, endpoint: str, user: str | None, address: str
) -> None:
    """Wait ``delay`` seconds (without holding the event loop) while ``hook`` runs on a
    worker thread; an error of the hook is logged, never raised."""

    def call() -> None:
        try:
            hook(endpoint, None if user is None else user[:USER_CHARS], address)
        except Exception:
            log.exception("the failed-login hook failed")

    await asyncio.gather(asyncio.sleep(delay), asyncio.to_thread(call))
