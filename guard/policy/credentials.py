"""Analysts' passwords, stored as SCRAM-SHA-256 verifiers (RFC 5802 / 7677), never plain.

The text form is PostgreSQL's (``pg_authid.rolpassword``), so a steward can copy a
verifier between the two and a PostgreSQL client's SCRAM exchange checks against it:

    SCRAM-SHA-256$<iterations>:<salt, base64>$<StoredKey, base64>:<ServerKey, base64>

From a verifier nobody learns the password (it is salted and stretched by PBKDF2), yet
both endpoints can check one: the PostgreSQL server by the SCRAM exchange, the HTTP API
by recomputing StoredKey from a bearer token (:func:`verify_password`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass

__all__ = ["DEFAULT_ITERATIONS", "ScramVerifier", "make_verifier", "parse_verifier", "verify_password"]

#: PostgreSQL's default (scram_iterations); enough to slow down guessing from a leaked policy
DEFAULT_ITERATIONS = 4096
_PREFIX = "SCRAM-SHA-256"


@dataclass(frozen=True)
class ScramVerifier:
    """What the server keeps of a password: salt, iteration count, StoredKey, ServerKey."""

    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes

    def text(self) -> str:
        b64 = _b64
        return f"{_PREFIX}${self.iterations}:{b64(self.salt)}${b64(self.stored_key)}:{b64(self.server_key)}"


def make_verifier(password: str, *, salt: bytes | None = None, iterations: int = DEFAULT_ITERATIONS) -> str:
    """The verifier text of ``password`` (a fresh random 16-byte salt unless given)."""
    if iterations < 1:
        raise ValueError(f"iterations={iterations}: must be at least 1")
    salt = secrets.token_bytes(16) if salt is None else salt
    salted = salted_password(password, salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    return ScramVerifier(iterations, salt, hashlib.sha256(client_key).digest(), server_key).text()


def parse_verifier(text: str) -> ScramVerifier:
    """Read a verifier's text form.

    Raises:
        ValueError: not a SCRAM-SHA-256 verifier (the message says which part is wrong,
            never echoes the text: it may be a password pasted by mistake).
    """
    expected = (
        "expected SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey> (make one with guard password)"
    )
    prefix, _, rest = text.partition("$")
    if prefix != _PREFIX or not rest:
        raise ValueError(f"not a SCRAM-SHA-256 verifier: {expected}")
    head, _, keys = rest.partition("$")
    iterations_text, _, salt_text = head.partition(":")
    stored_text, _, server_text = keys.partition(":")
    if not iterations_text.isdigit() or int(iterations_text) < 1:
        raise ValueError(f"the iteration count must be a positive whole number: {expected}")
    try:
        salt, stored, server = (
            base64.b64decode(t, validate=True) for t in (salt_text, stored_text, server_text)
        )
    except (binascii.Error, ValueError):
        raise ValueError(f"salt and keys must be base64: {expected}") from None
    if not salt or len(stored) != 32 or len(server) != 32:
        raise ValueError(f"a non-empty salt and two 32-byte SHA-256 keys are needed: {expected}")
    return ScramVerifier(int(iterations_text), salt, stored, server)


def salted_password(password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(Normalize(password), salt, i) of RFC 5802 (SASLprep left out: passwords are
    taken as their UTF-8 bytes, as PostgreSQL does for any it cannot normalise)."""
    return hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)


def verify_password(verifier: ScramVerifier, password: str) -> bool:
    """Whether ``password`` is the one ``verifier`` was made from (constant-time compare)."""
    salted = salted_password(password, verifier.salt, verifier.iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    return hmac.compare_digest(hashlib.sha256(client_key).digest(), verifier.stored_key)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
