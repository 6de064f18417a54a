"""Where the endpoints listen: sockets, TLS, and the errors an operator can act on.

Each failure becomes a :class:`~guard.errors.GuardError` whose message names the option
to change (the CLI prints it and exits 2), never an OSError's traceback.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import ssl
from pathlib import Path

from guard.errors import GuardError

__all__ = ["bind", "is_loopback", "listen_error", "tls_context"]

#: why a port cannot be had, in the operator's words
_BIND_ERRORS = {
    errno.EADDRINUSE: "the port is already in use (another server, or an earlier guard still running)",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
    errno.EADDRNOTAVAIL: "the address is not one of this machine's",
}


def tls_context(cert: Path, key: Path) -> ssl.SSLContext:
    """One server-side TLS context (TLS 1.2 or later) for both endpoints.

    Raises:
        GuardError: a file is missing or unreadable, is not PEM, or the key does not
            belong to the certificate.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(certfile=cert, keyfile=key)
    except OSError as exc:  # ssl.SSLError is an OSError too
        if isinstance(exc, ssl.SSLError):
            why = (
                "the key does not match the certificate"
                if "MISMATCH" in str(exc)
                else "not a PEM certificate and key"
            )
        else:
            why = exc.strerror or type(exc).__name__
        raise GuardError(
            f"cannot use --tls-cert {cert} with --tls-key {key}: {why}; "
            "give a PEM certificate and its private key"
        ) from None
    return context


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: assume it is reachable from elsewhere
        return False


def bind(host: str, port: int, endpoint: str, option: str) -> socket.socket:
    """A listening TCP socket on ``host:port`` (0: any free port).

    Raises:
        GuardError: the address cannot be had (the message names ``option``).
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise GuardError(f"cannot listen on {host!r} for {endpoint}: {exc.strerror}; check --host") from None
    sock = socket.socket(family, kind, proto)
    try:
        # a restarted guard may take its port back while old connections linger in TIME_WAIT
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise listen_error(exc, host, port, endpoint, option) from None
    sock.setblocking(False)
    return sock


def listen_error(exc: OSError, host: str, port: int, endpoint: str, option: str) -> GuardError:
    why = _BIND_ERRORS.get(exc.errno or 0, exc.strerror or type(exc).__name__)
    return GuardError(
        f"cannot listen on {host}:{port} for {endpoint}: {why}; pick another {option} or --host"
    )
