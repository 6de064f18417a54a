"""A throw-away TLS certificate for the endpoints' tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ["self_signed"]


def self_signed(folder: Path) -> tuple[Path, Path]:
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
