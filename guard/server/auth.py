"""Who is calling: an analyst's name and password (PostgreSQL), or a bearer token (HTTP).

The policy keeps only SCRAM-SHA-256 verifiers, so checking a password means recomputing
PBKDF2 (milliseconds, on purpose). The HTTP API sends the password as a bearer token on
every request, so a token once verified is remembered by a keyed digest (HMAC-SHA-256
with a key of this process: never the token, nor a fast unsalted hash of it). An unknown
token costs at most one verification per analyst, and a token that failed is remembered
too, so repeating it costs nothing. Tokens are never logged.

The caches are looked up by digest: how long a lookup takes can say something about a
digest, nothing about the token; the verifiers themselves are compared in constant time
(:func:`guard.policy.credentials.verify_password`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections import OrderedDict
from functools import cache

from guard.policy.credentials import ScramVerifier, make_verifier, parse_verifier, verify_password
from guard.policy.model import Analyst, Policy

__all__ = ["Authenticator"]

#: remembered tokens (verified and failed, each): enough for every analyst of a policy and
#: a burst of bad guesses; an evicted token is simply verified again
_CACHE_SIZE = 1024


@cache
def _decoy() -> ScramVerifier:
    """Checked instead of a missing verifier, so an unknown name costs what a wrong
    password does (same default iteration count)."""
    return parse_verifier(make_verifier("statguard-decoy", salt=b"statguard-decoy!"))


class _Lru:
    """Digest -> analyst name, least recently used evicted first; thread-safe."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[bytes, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, digest: bytes) -> str | None:
        with self._lock:
            value = self._items.get(digest)
            if value is not None:
                self._items.move_to_end(digest)
            return value

    def put(self, digest: bytes, value: str) -> None:
        with self._lock:
            self._items[digest] = value
            self._items.move_to_end(digest)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


class Authenticator:
    """Checks credentials against the verifiers of one policy's analysts.

    Thread-safe: the HTTP API calls it from its worker threads.
    """

    def __init__(self, policy: Policy, cache_size: int = _CACHE_SIZE) -> None:
        self.policy = policy
        self._key = secrets.token_bytes(32)
        #: analysts who can log in (those with a password), by name
        self._analysts = {a.name: a for a in policy.analysts if a.password is not None}
        #: digest of a verified token -> analyst name
        self._verified = _Lru(cache_size)
        #: digest of a token (or name and password) that matched nobody -> ""
        self._failed = _Lru(cache_size)

    def _digest(self, name: str, secret: str) -> bytes:
        # the name is length-prefixed so ("ab", "c") and ("a", "bc") differ
        return hmac.new(self._key, f"{len(name)}:{name}:{secret}".encode(), hashlib.sha256).digest()

    def analyst_for_password(self, name: str, password: str) -> Analyst | None:
        """The analyst called ``name`` if ``password`` is theirs; None otherwise (unknown
        name, no password in the policy, or a wrong password: indistinguishable, and each
        costs one PBKDF2 run unless the pair was verified before)."""
        digest = self._digest(name, password)
        known = self._verified.get(digest)
        if known is not None:
            return self._analysts[known]
        if self._failed.get(digest) is not None:
            return None
        analyst = self._analysts.get(name)
        verifier = analyst.password if analyst is not None else None
        matches = verify_password(verifier or _decoy(), password)  # always one run, even for no one
        if analyst is None or verifier is None or not matches:
            self._failed.put(digest, "")
            return None
        self._verified.put(digest, name)
        return analyst

    def analyst_for_token(self, token: str) -> Analyst | None:
        """The one analyst whose password is ``token``, or None.

        Costs one PBKDF2 run per analyst the first time a token is seen, nothing after
        (verified and failed tokens are both remembered). A token that is the password of
        two analysts identifies neither: the policy should not give two analysts one
        password, and guessing which one was meant would hand out the wrong budget.
        """
        digest = self._digest("", token)
        known = self._verified.get(digest)
        if known is not None:
            return self._analysts[known]
        if self._failed.get(digest) is not None:
            return None
        # every analyst is checked, matched or not, so the time taken does not say which
        # analyst (or whether any) a token belongs to
        matches = [a for a in self._analysts.values() if _verifies(a, token)]
        if len(matches) != 1:
            self._failed.put(digest, "")
            return None
        self._verified.put(digest, matches[0].name)
        return matches[0]


def _verifies(analyst: Analyst, password: str) -> bool:
    return analyst.password is not None and verify_password(analyst.password, password)
