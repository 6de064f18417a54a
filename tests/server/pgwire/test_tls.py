"""TLS: SSLRequest answered 'S' and the session encrypted when the server has a certificate."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A throw-away certificate for localhost: with ``cryptography`` when installed, else openssl."""
    cert, key = folder / "server.crt", folder / "server.key"
    try:
        import datetime as dt

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        if shutil.which("openssl") is None:
            pytest.skip("neither cryptography nor openssl is available to make a certificate")
        curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
        files = ["-keyout", str(key), "-out", str(cert)]
        subprocess.run(
            ["openssl", "req", "-x509", *curve, "-nodes", *files, "-days", "1", "-subj", "/CN=localhost"],
            check=True,
            capture_output=True,
        )
        return cert, key
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(private, hashes.SHA256())
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert, key


@pytest.fixture(scope="module")
def tls_students(serve: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    cert, key = _self_signed(tmp_path_factory.mktemp("tls"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return serve("students", ssl_context=context)


def test_sslmode_require_gets_an_encrypted_session(tls_students: Any) -> None:
    with psycopg.connect(tls_students.dsn(sslmode="require"), autocommit=True) as conn:
        assert conn.pgconn.ssl_in_use
        assert conn.execute("SELECT major, COUNT(*) FROM students GROUP BY major").fetchall() == [
            ("CS", 5),
            ("EE", 4),
        ]
        conn.cancel_safe()  # nothing runs: the cancel connection (over TLS too) changes nothing
        assert conn.execute("SELECT COUNT(*) FROM students").fetchone() == (9,)


def test_plain_connections_are_still_accepted(tls_students: Any) -> None:
    with psycopg.connect(tls_students.dsn(sslmode="disable"), autocommit=True) as conn:
        assert not conn.pgconn.ssl_in_use
        assert conn.execute("SELECT COUNT(*) FROM students").fetchone() == (9,)


def test_server_without_certificate_declines_tls(students: Any) -> None:
    with pytest.raises(psycopg.OperationalError, match="does not support SSL"):
        psycopg.connect(students.dsn(sslmode="require"))
