"""The guard's own SQL files (``sql/`` in the repository, ``guard/_sql`` in a wheel)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

__all__ = ["read_sql"]

_PACKAGED = Path(__file__).parent / "_sql"
_REPOSITORY = Path(__file__).parent.parent / "sql"


@cache
def read_sql(name: str) -> str:
    """The text of ``sql/NAME``; raises FileNotFoundError if the install lacks it."""
    for folder in (_PACKAGED, _REPOSITORY):
        path = folder / name
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise FileNotFoundError(f"the guard's SQL file {name!r} is missing from this installation")


def statements(text: str) -> list[str]:
    """Split a DDL file on semicolons at line ends (the files hold no string with one)."""
    parts = [part.strip() for part in text.split(";\n")]
    return [part.rstrip(";") for part in parts if part and not _only_comments(part)]


def _only_comments(part: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in part.splitlines())
