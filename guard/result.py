"""Stage 8: the protected answer an analyst receives, immutable once built.

Rows, flags and notes are read-only lists: a later stage that withholds more (the
history audit) returns which cells, and :meth:`ProtectedResult.withholding` builds a new
answer. No stage can change what another stage has already decided.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, NoReturn, SupportsIndex

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["FLAG_SUFFIX", "NAN_TEXT", "Flag", "ProtectedResult", "ReadOnlyList", "flag_names", "is_nan"]

#: the name of an aggregate column's flag column is the column's label with this suffix
FLAG_SUFFIX = "_flag"

#: a float NaN as the query log keeps it (:meth:`ProtectedResult.logged_rows`): JSON has
#: no NaN, and null is the NULL group, which the engine's GROUP BY (and IS NULL) keeps
#: apart from the NaN group; PostgreSQL spells the value so too
NAN_TEXT = "NaN"


def is_nan(value: Any) -> bool:
    """Whether ``value`` is a float NaN, Python's or numpy's (``np.float32`` is no float)."""
    return isinstance(value, float | np.floating) and math.isnan(value)


def flag_names(columns: Sequence[str], flagged: Collection[int]) -> dict[int, str]:
    """The flag column's name for each column in ``flagged``: ``<label>_flag``, or with
    ``_2``, ``_3``, ... appended when an answer column or an earlier flag column already
    has that name (letter case ignored, as clients that fold names would), so that a
    tabular client never sees two columns of one name (``SUM(x) AS s, COUNT(*) AS
    s_flag``). The endpoints' Describe and the rows use this one function."""
    taken = {name.lower() for name in columns}
    names: dict[int, str] = {}
    for i in sorted(flagged):
        base = f"{columns[i]}{FLAG_SUFFIX}"
        name, n = base, 1
        while name.lower() in taken:
            n += 1
            name = f"{base}_{n}"
        taken.add(name.lower())
        names[i] = name
    return names


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
    read-only (:class:`ReadOnlyList`). ``aggregates`` are the positions of the columns
    that hold aggregates (the others are group keys and GROUPING() outputs); None when
    whoever built the answer did not say, which :meth:`with_flag_columns` reads as every
    column.
    """

    columns: list[str]
    rows: list[list[Any]]
    flags: list[list[str]]
    notes: list[str] = field(default_factory=list)
    aggregates: tuple[int, ...] | None = None
    #: per row, its grouping set (the group keys not rolled up), for the query log only
    #: (:meth:`logged_levels`): a row of a ROLLUP, CUBE or GROUPING SETS whose key is NULL
    #: is a total or a group of real NULLs, which its values alone do not tell. None for a
    #: plain GROUP BY (one grouping set) or when whoever built the answer did not say. Not
    #: sent (``to_dict``, ``to_pandas``) nor compared: the answer is the same without it.
    levels: tuple[tuple[str, ...], ...] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        # frozen: the fields are set once, here, as read-only copies
        object.__setattr__(self, "columns", ReadOnlyList(self.columns))
        object.__setattr__(self, "rows", _frozen_rows(self.rows))
        object.__setattr__(self, "flags", _frozen_rows(self.flags))
        object.__setattr__(self, "notes", ReadOnlyList(self.notes))
        if self.aggregates is not None:
            object.__setattr__(self, "aggregates", tuple(self.aggregates))
        if self.levels is not None:
            levels = tuple(tuple(level) for level in self.levels)
            if len(levels) != len(self.rows):
                raise ValueError(f"{len(levels)} levels for {len(self.rows)} rows: one level per row")
            object.__setattr__(self, "levels", levels)

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
        return ProtectedResult(
            list(self.columns), rows, flags, [*self.notes, *notes], self.aggregates, self.levels
        )

    def with_aggregates(self, positions: Iterable[int]) -> ProtectedResult:
        """A copy that knows which columns hold aggregates (``positions``, 0-based)."""
        return ProtectedResult(
            list(self.columns),
            self.rows,
            self.flags,
            list(self.notes),
            tuple(sorted(set(positions))),
            self.levels,
        )

    def with_flag_columns(self) -> ProtectedResult:
        """A copy with a text column ``<label>_flag`` after each aggregate column, holding
        that value's :class:`Flag` (``released``, ``suppressed`` or ``noised``), so that a
        tabular client, which drops notes and flags, can tell a withheld value (NULL,
        ``suppressed``) from a NULL that was released. The flag columns' own cells are
        released; the copy's ``aggregates`` are the same columns, at their new positions.
        """
        flagged = set(range(len(self.columns)) if self.aggregates is None else self.aggregates)
        if not flagged:
            return self
        names = flag_names(self.columns, flagged)
        columns: list[str] = []
        aggregates: list[int] = []
        for i, name in enumerate(self.columns):
            if i in flagged:
                aggregates.append(len(columns))
            columns.append(name)
            if i in flagged:
                columns.append(names[i])
        released = Flag.RELEASED.value
        rows: list[list[Any]] = []
        flags: list[list[str]] = []
        for row, row_flags in zip(self.rows, self.flags, strict=True):
            values: list[Any] = []
            cell_flags: list[str] = []
            for i, (value, flag) in enumerate(zip(row, row_flags, strict=True)):
                values.append(value)
                cell_flags.append(flag)
                if i in flagged:
                    values.append(flag)
                    cell_flags.append(released)
            rows.append(values)
            flags.append(cell_flags)
        return ProtectedResult(columns, rows, flags, list(self.notes), tuple(aggregates), self.levels)

    @property
    def nothing_released(self) -> bool:
        """True when the answer has aggregate values and every one of them is withheld
        (an answer without rows, or without aggregate columns, releases no value but
        withholds none either)."""
        columns = range(len(self.columns)) if self.aggregates is None else self.aggregates
        cells = [row[c] for row in self.flags for c in columns]
        return bool(cells) and all(flag == Flag.SUPPRESSED.value for flag in cells)

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

    def logged_rows(self) -> list[list[Any]]:
        """The rows as the query log keeps them: as :meth:`to_dict` sends them (a NaN is
        :data:`NAN_TEXT` in both), except an infinity, which the log keeps as a float
        (Python's json reads its token back) and ``to_dict`` spells as PostgreSQL does.
        The offline audit matches logged rows to cells by their keys
        (``guard.history.keys.normalized`` names both alike), and a NaN logged as null
        would be matched to the NULL cell: the NaN cell's release would go unaudited."""
        return [[_logged(v) for v in row] for row in self.rows]

    def logged_levels(self) -> dict[str, list[Any]] | None:
        """The rows' grouping sets as the query log keeps them (None when not known):
        ``{"sets": [["region", "sex"], ["region"], []], "rows": [0, 1, 0, 2]}``, each
        distinct set once (its keys named, in ``group_by`` order) and per row the index of
        its set. The offline audit reads them to match a row to the cell that was sent."""
        if self.levels is None:
            return None
        index: dict[tuple[str, ...], int] = {}
        rows = [index.setdefault(level, len(index)) for level in self.levels]
        return {"sets": [list(level) for level in index], "rows": rows}

    def to_pandas(self, flags: bool = False) -> pd.DataFrame:
        """The rows as a DataFrame (withheld cells are missing values); flags in ``.attrs``.

        ``flags``: add a text column ``<label>_flag`` after each aggregate column
        (:meth:`with_flag_columns`), so the flags travel with the frame itself.
        """
        import pandas as pd

        if flags:
            return self.with_flag_columns().to_pandas()
        frame = pd.DataFrame(self.rows, columns=self.columns)
        frame.attrs["flags"] = [list(row) for row in self.flags]
        frame.attrs["notes"] = list(self.notes)
        return frame


#: values the log keeps as they are (no NaN, no date)
_PLAIN = frozenset({int, str, bool, type(None)})


def _logged(value: Any) -> Any:
    """A value as :meth:`ProtectedResult.logged_rows` keeps it (by exact type first: a
    many-cell answer logs tens of thousands of values, most of them plain)."""
    kind = type(value)
    if kind is float:
        return NAN_TEXT if value != value else value
    if kind in _PLAIN:
        return value
    return NAN_TEXT if is_nan(value) else _dated(value)


def _dated(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.date | dt.datetime | dt.time) else value


def _json_value(value: Any) -> Any:
    if isinstance(value, float | np.floating) and not math.isfinite(value):
        # JSON has no NaN or infinity (json.dumps would write the tokens NaN and
        # Infinity, which strict parsers reject), and null is the NULL group, which
        # GROUP BY keeps apart from the NaN group: spelled as PostgreSQL's to_json
        # spells them (and R's jsonlite reads them back as numbers)
        return NAN_TEXT if value != value else ("Infinity" if value > 0 else "-Infinity")
    return _dated(value)
