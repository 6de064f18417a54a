"""Copies of the example policies pointed at another engine, for the back-end tests."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

__all__ = ["POLICIES", "policy_copy"]

POLICIES = Path(__file__).resolve().parents[2] / "policies"
_COPIES = itertools.count()


def policy_copy(
    source: str,
    folder: Path,
    backend: dict[str, Any],
    change: Callable[[dict[str, Any]], None] | None = None,
) -> Path:
    """policies/SOURCE.yaml written into ``folder`` (SOURCE.yaml, or a new name when that
    exists) with absolute
    file-source paths, the given ``backend:`` section, no ``state:`` and ``change``
    applied. Column order is kept (yaml sorts keys unless told not to)."""
    document = yaml.safe_load((POLICIES / f"{source}.yaml").read_text())
    for table in document["tables"].values():
        kind, path = next(iter(table["source"].items()))
        if kind != "table":  # a table of the engine itself has no file
            table["source"][kind] = str((POLICIES / path).resolve())
    document["backend"] = backend
    document.pop("state", None)
    if change is not None:
        change(document)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{source}.yaml"
    if path.exists():
        path = folder / f"{source}-{next(_COPIES)}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path
