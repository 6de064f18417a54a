"""The server side of SCRAM-SHA-256 (RFC 5802 / 7677), against stored verifiers only.

The server never sees or keeps a password: it holds StoredKey and ServerKey
(:class:`guard.policy.credentials.ScramVerifier`) and checks the client's proof with
them. For an unknown analyst, or one without a password, the exchange runs to the end
with a salt derived from a server secret and the user name, then fails exactly as a
wrong password does: the answer never tells whether a user name exists.

Channel binding (SCRAM-SHA-256-PLUS) is not offered; clients that support it say so
with the ``y`` flag, which is accepted.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

from guard.policy.credentials import DEFAULT_ITERATIONS, ScramVerifier
from guard.server.pgwire import sqlstate
from guard.server.pgwire.sqlstate import SqlError

__all__ = ["MECHANISM", "ScramExchange"]

MECHANISM = "SCRAM-SHA-256"


class ScramExchange:
    """One authentication attempt: :meth:`server_first`, then :meth:`server_final`."""

    def __init__(self, verifier: ScramVerifier | None, user: str, mock_secret: bytes) -> None:
        """``verifier`` None runs a mock exchange that always fails (unknown user)."""
        self._verifier = verifier
        if verifier is None:
            self._salt = hmac.new(mock_secret, user.encode("utf-8"), hashlib.sha256).digest()[:16]
            self._iterations = DEFAULT_ITERATIONS
        else:
            self._salt, self._iterations = verifier.salt, verifier.iterations
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._gs2_header = ""

    def server_first(self, client_first: bytes) -> bytes:
        """Read client-first-message, answer server-first-message.

        Raises:
            SqlError: a malformed message, or channel binding requested.
        """
        text = _decode(client_first)
        flag, _, rest = text.partition(",")
        authzid, _, bare = rest.partition(",")
        if flag.startswith("p="):
            raise _violation(
                "channel binding is not supported: connect with channel_binding=disable or prefer"
            )
        if flag not in ("n", "y") or (authzid and not authzid.startswith("a=")) or not bare:
            raise _violation("malformed SCRAM client-first-message")
        attributes = _attributes(bare)
        if "m" in attributes or not attributes.get("r"):
            raise _violation("malformed SCRAM client-first-message")
        self._gs2_header = f"{flag},{authzid},"
        self._client_first_bare = bare
        self._nonce = attributes["r"] + base64.b64encode(secrets.token_bytes(18)).decode("ascii")
        salt = base64.b64encode(self._salt).decode("ascii")
        self._server_first = f"r={self._nonce},s={salt},i={self._iterations}"
        return self._server_first.encode("ascii")

    def server_final(self, client_final: bytes) -> bytes | None:
        """Check client-final-message's proof: server-final-message, or None when it fails.

        Raises:
            SqlError: a malformed message (a wrong proof is not an exception).
        """
        text = _decode(client_final)
        without_proof, separator, proof_text = text.rpartition(",p=")
        if not separator:
            raise _violation("malformed SCRAM client-final-message")
        attributes = _attributes(without_proof)
        binding = base64.b64encode(self._gs2_header.encode("utf-8")).decode("ascii")
        if attributes.get("c") != binding or attributes.get("r") != self._nonce:
            raise _violation("SCRAM channel binding or nonce does not match")
        try:
            proof = base64.b64decode(proof_text, validate=True)
        except (binascii.Error, ValueError):
            raise _violation("malformed SCRAM proof") from None
        # an unknown user is checked against random keys: the same work, the same failure
        verifier = self._verifier or ScramVerifier(
            self._iterations, self._salt, secrets.token_bytes(32), secrets.token_bytes(32)
        )
        if len(proof) != len(verifier.stored_key):
            return None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.new(verifier.stored_key, auth_message, hashlib.sha256).digest()
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.sha256(client_key).digest(), verifier.stored_key):
            return None
        server_signature = hmac.new(verifier.server_key, auth_message, hashlib.sha256).digest()
        return b"v=" + base64.b64encode(server_signature)


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _violation("SCRAM messages must be UTF-8") from None


def _attributes(text: str) -> dict[str, str]:
    attributes = {}
    for part in text.split(","):
        name, separator, value = part.partition("=")
        if len(name) != 1 or not separator:
            raise _violation("malformed SCRAM attribute")
        attributes[name] = value
    return attributes


def _violation(message: str) -> SqlError:
    return SqlError(sqlstate.PROTOCOL_VIOLATION, message, fatal=True)
