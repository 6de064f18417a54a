"""Answers as messages: RowDescription and DataRows in the formats the client asked for."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from guard.server.pgwire import messages, sqlstate
from guard.server.pgwire.describe import ResultColumn
from guard.server.pgwire.sqlstate import SqlError
from guard.server.pgwire.values import BINARY, TEXT, encode_value, supports_binary

__all__ = ["column_formats", "data_rows", "row_description"]


def column_formats(requested: Sequence[int], count: int, what: str = "columns") -> tuple[int, ...]:
    """Bind's format codes for ``count`` result columns (or parameters, ``what``): none
    means all text, one applies to all, otherwise one per item.

    Raises:
        SqlError: a count that fits none of these, or an unknown format code.
    """
    if not requested:
        return (TEXT,) * count
    if any(code not in (TEXT, BINARY) for code in requested):
        raise SqlError(sqlstate.PROTOCOL_VIOLATION, f"unsupported format code in {list(requested)}: 0 or 1")
    if len(requested) == 1:
        return (requested[0],) * count
    if len(requested) != count:
        raise SqlError(
            sqlstate.PROTOCOL_VIOLATION, f"bind message has {len(requested)} formats for {count} {what}"
        )
    return tuple(requested)


def row_description(columns: Sequence[ResultColumn], formats: Sequence[int]) -> bytes:
    """RowDescription of ``columns``.

    Raises:
        SqlError: binary format asked for a type without a binary form (before any row).
    """
    fields = []
    for column, fmt in zip(columns, formats, strict=True):
        if fmt == BINARY and not supports_binary(column.type):
            raise SqlError(
                sqlstate.FEATURE_NOT_SUPPORTED,
                f"binary result format is not supported for column {column.name!r} of type "
                f"{column.type.sql_name}: request text format",
            )
        fields.append(messages.Field(column.name, column.type.oid, column.type.length, -1, fmt))
    return messages.row_description(fields)


def data_rows(
    columns: Sequence[ResultColumn], rows: Iterable[Sequence[Any]], formats: Sequence[int]
) -> list[bytes]:
    """One DataRow per row; withheld (None) cells are NULL."""
    out = []
    for row in rows:
        out.append(
            messages.data_row(
                [
                    None if value is None else encode_value(value, column.type, fmt)
                    for value, column, fmt in zip(row, columns, formats, strict=True)
                ]
            )
        )
    return out
