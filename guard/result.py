"""Stage 9: the protected answer an analyst receives."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ProtectedResult"]


@dataclass(frozen=True)
class ProtectedResult:
    """Columns, rows (withheld cells are None) and a flag for every cell.

    Flags are ``"released"``, ``"suppressed"``, ``"noised"`` or ``"rounded"``; group-key
    cells are always ``"released"``. ``notes`` explain what protection did, in words that
    never contain a withheld value.
    """

    columns: list[str]
    rows: list[list[Any]]
    flags: list[list[str]]
    notes: list[str] = field(default_factory=list)

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
