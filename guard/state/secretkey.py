"""The state folder's secret key: seeds what must look random to analysts yet repeat for
the same table (suppression seeds, audit weights, the unit choice in noise)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from guard.errors import BackendError

__all__ = ["secret_key"]

#: bytes of a new key; a shorter file is a damaged one
_KEY_BYTES = 32
_LEAST_BYTES = 16


def secret_key(path: Path, read_only: bool) -> bytes:
    """The key at ``path``, created once (readable by the owner only) unless ``read_only``.
    The caller serializes calls (two creators would race for the file).

    Raises:
        BackendError: the key cannot be read, is truncated, or is missing in a read-only store.
    """
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise BackendError(f"cannot read the store's secret key {path} ({exc.strerror})") from None
    else:
        if len(key) < _LEAST_BYTES:
            raise BackendError(
                f"the store's secret key {path} is empty or truncated ({len(key)} bytes): restore "
                "it from a backup. A new key changes every suppression pattern and audit weight, "
                "so start a new state folder rather than deleting it"
            )
        return key
    if read_only:
        raise BackendError(f"the store's secret key {path} is missing: restore it from a backup")
    key = secrets.token_bytes(_KEY_BYTES)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key)
    return key
