"""Stage 8: the protected answer an analyst receives, immutable once built.

Rows, flags and notes are read-only lists: a later stage that withholds more (the
history audit) returns which cells, and :meth:`ProtectedResult.withholding` builds a new
answer. No stage can change what another stage has already decided.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, NoReturn, SupportsIndex

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Flag", "ProtectedResult", "ReadOnlyList"]


class Flag(Enum):
    """What became of one value of an answer."""

    RELEASED = "released"
    SUPPRESSED = "suppressed"
    NOISED = "noised"


class ReadOnlyList(list[Any]):
    """A list that refuses every change (it still equals a plain list with the same items,
    so ``result.rows == [[...]]`` reads as before)."""

    def _refuse(self, *_: object, **__: object) -> NoReturn:
        raise TypeError("a ProtectedResult cannot be changed: build a new one (withholding())")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = remove = clear = sort = reverse = _refuse

    def pop(self, index: SupportsIndex = -1) -> NoReturn:
        self._refuse()

    def __reduce__(self) -> tuple[type[list[Any]], tuple[list[Any]]]:
        return list, (list(self),)


def _frozen_rows(rows: Iterable[Iterable[Any]]) -> ReadOnlyList:
    return ReadOnlyList(ReadOnlyList(row) for row in rows)


@dataclass(frozen=True)
class ProtectedResult:
    """Columns, rows (withheld cells are None) and a flag for every cell.

    Flags are the values of :class:`Flag` (``"released"``, ``"suppressed"``,
    ``"noised"``); group-key cells are always ``"released"``. ``notes`` explain what
    protection did, in words that never contain a withheld value. Every list is
    read-only (:class:`ReadOnlyList`).
    """

    columns: list[str]
    rows: list[list[Any]]
    flags: list[list[str]]
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        # frozen: the fields are set once, here, as read-only copies
        object.__setattr__(self, "columns", ReadOnlyList(self.columns))
        object.__setattr__(self, "rows", _frozen_rows(self.rows))
        object.__setattr__(self, "flags", _frozen_rows(self.flags))
        object.__setattr__(self, "notes", ReadOnlyList(self.notes))

    def withholding(self, cells: Iterable[tuple[int, int]], notes: Sequence[str] = ()) -> ProtectedResult:
        """A copy with the values at ``cells`` (row, column) withheld (None, flagged
        ``suppressed``) and ``notes`` added."""
        hidden: dict[int, set[int]] = {}
        for r, c in cells:
            hidden.setdefault(r, set()).add(c)
        if not hidden and not notes:
            return self
        suppressed = Flag.SUPPRESSED.value
        rows = [
            [None if c in hidden.get(r, ()) else v for c, v in enumerate(row)]
            for r, row in enumerate(self.rows)
        ]
        flags = [
            [suppressed if c in hidden.get(r, ()) else f for c, f in enumerate(row)]
            for r, row in enumerate(self.flags)
        ]
        return ProtectedResult(list(self.columns), rows, flags, [*self.notes, *notes])

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": "answered",
            "columns": list(self.columns),
            "rows": [[_json_value(v) for v in row] for row in self.rows],
            "flags": [list(row) for row in self.flags],
            "notes": list(self.notes),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def to_pandas(self) -> pd.DataFrame:
        """The rows as a DataFrame (withheld cells are missing values); flags in ``.attrs``."""
        import pandas as pd

        frame = pd.DataFrame(self.rows, columns=self.columns)
        frame.attrs["flags"] = [list(row) for row in self.flags]
        frame.attrs["notes"] = list(self.notes)
        return frame


def _json_value(value: Any) -> Any:
    if isinstance(value, dt.date | dt.datetime | dt.time):
        return value.isoformat()
    if isinstance(value, float) and value != value:  # NaN has no JSON form
        return None
    return value
