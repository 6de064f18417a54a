"""The query log's hash chain and its head.

Each log record's hash covers the previous record's hash and the record itself, so a
changed or removed record breaks the chain from there on. Removing the *last* records
leaves a shorter chain that is still intact; to notice that, the store also keeps the
chain's head (the last record's id and hash) in a small file beside the database,
replaced atomically after every commit. A head ahead of the log means records were cut
from its tail. (Whoever can rewrite both the database and the head can still rewind
both: to be tamper-evident against the store's owner, copy the head that
``guard log --verify`` prints to another system.)
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guard.errors import BackendError

__all__ = [
    "GENESIS",
    "LATER_FIELDS",
    "ChainCheck",
    "Head",
    "check_chain",
    "read_head",
    "record_hash",
    "write_head",
]

GENESIS = "0" * 64

#: fields the log gained after records were hashed without them: a record's hash covers
#: one only when it is set, so every record written before keeps its hash (and a record
#: that set one fails the check when it is cleared, like any altered field)
LATER_FIELDS = frozenset({"levels"})


def record_hash(prev_hash: str, ts: str, record: dict[str, Any]) -> str:
    """The hash of one record (its encoded fields and time) after ``prev_hash``."""
    fields = {k: v for k, v in record.items() if v is not None or k not in LATER_FIELDS}
    body = json.dumps({"ts": ts, **fields}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256((prev_hash + body).encode()).hexdigest()


@dataclass(frozen=True)
class Head:
    """The last committed record: its id and hash."""

    id: int
    hash: str


@dataclass(frozen=True)
class ChainCheck:
    """What :func:`check_chain` found.

    ``checked``: records in the log. ``broken``: id of the first record whose hash does
    not follow, or, when records were cut from the tail, the id of the first missing one
    (None: intact). ``missing``: how
    many records the head says were cut from the tail (0 when none or unknown).
    """

    checked: int
    broken: int | None
    missing: int = 0
    head: Head | None = None


def check_chain(rows: Iterable[tuple[int, str, dict[str, Any], str, str]], head: Head | None) -> ChainCheck:
    """Check ``rows`` (id, ts text, encoded fields, prev_hash, hash), in id order, against
    each other and against ``head``."""
    listed = list(rows)
    checked = len(listed)
    previous = GENESIS
    last: Head | None = None
    for id_, ts_text, encoded, prev_hash, hash_ in listed:
        if prev_hash != previous or record_hash(prev_hash, ts_text, encoded) != hash_:
            return ChainCheck(checked, id_, 0, head)
        previous = hash_
        last = Head(id_, hash_)
    if head is not None and (last is None or head.id > last.id):
        first_missing = 1 if last is None else last.id + 1
        return ChainCheck(checked, first_missing, head.id - first_missing + 1, head)
    if head is not None and last is not None and head.id == last.id and head.hash != last.hash:
        return ChainCheck(checked, last.id, 0, head)
    return ChainCheck(checked, None, 0, head)


def read_head(path: Path) -> Head | None:
    """The head kept at ``path`` (None for a store that has none yet).

    Raises:
        BackendError: the file exists but cannot be read as a head.
    """
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        return Head(int(document["id"]), str(document["hash"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BackendError(
            f"the log head {path} is damaged ({type(exc).__name__}): the log's tail cannot be checked; "
            "restore it from a backup, or delete it to check the chain without its tail"
        ) from None


def write_head(path: Path, head: Head) -> None:
    """Replace the head at ``path`` atomically (a crash leaves the old one or the new one)."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps({"id": head.id, "hash": head.hash}), encoding="utf-8")
    os.replace(temporary, path)
