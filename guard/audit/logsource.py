"""Reading a query log for the offline audit: the guard's own store, or a CSV / JSONL file.

A log is a sequence of answered requests (analyst, time, SQL). Three sources:

- the guard's store (``StateStore.log()`` records): only ``decision == "answered"``
  records; each keeps what the guard published (rows and per-cell flags), so cells the
  guard withheld are not counted as released;
- a CSV file with a header naming the columns ``analyst``, ``sql`` and ``time`` (or
  ``ts``); other columns are ignored;
- a JSONL file, one object per line with the same keys. ``guard log --format json``
  writes this format: records carrying a ``decision`` other than ``answered`` are
  skipped, and ``rows`` / ``flags`` / ``levels`` are read like the store's.

Times are ISO 8601 (a time zone is converted to UTC) or numbers of seconds since the
epoch; a time may be empty. Bad input raises :class:`LogFileError` naming the file and
line, never a traceback.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guard.errors import PolicyError

__all__ = ["Answer", "LogEntry", "LogFileError", "entries_from_store", "read_log"]

_TIME_KEYS = ("time", "ts")
_EPOCH = re.compile(r"[0-9]+(\.[0-9]*)?")
_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")


class LogFileError(PolicyError):
    """A query log file cannot be read. Messages read ``file:line: message``.

    A PolicyError because a log given to the audit is configuration input like a policy
    (same SQLSTATE, HTTP status and exit code 2).
    """


@dataclass(frozen=True)
class Answer:
    """What the guard published for a logged request: the rows it sent (withheld values
    are None), each cell's flag (``released``, ``suppressed``, ``noised``, ...) and, for
    an answer of several grouping sets logged since the log keeps them, each row's
    grouping set (the keys not rolled up; None when the log does not say)."""

    rows: tuple[tuple[Any, ...], ...]
    flags: tuple[tuple[str, ...], ...]
    levels: tuple[tuple[str, ...], ...] | None = None


@dataclass(frozen=True)
class LogEntry:
    """One answered request to replay.

    ``seq`` numbers the entries of one log from 1, in log order; ``ref`` says where the
    entry came from (``queries.csv:4``, ``store record 7``). ``time`` is naive UTC.
    ``data_version`` and ``answer`` are known only for the guard's own log.
    """

    seq: int
    ref: str
    analyst: str
    time: dt.datetime | None
    sql: str
    data_version: str | None = None
    answer: Answer | None = None


def read_log(path: Path) -> list[LogEntry]:
    """The answered entries of a CSV or JSONL log file, in file order.

    The format follows the suffix (``.csv``; ``.jsonl``, ``.ndjson``, ``.json``);
    otherwise a file whose first non-blank character is ``{`` is JSONL.

    Raises:
        LogFileError: the file cannot be read, is not UTF-8, lacks a required column,
            or a line is malformed (the message names the file and line).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LogFileError(f"{path}: cannot read the log file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise LogFileError(f"{path}: not UTF-8 text (byte {exc.start}): save the log as UTF-8") from None
    suffix = path.suffix.lower()
    is_jsonl = suffix in _JSONL_SUFFIXES or (suffix != ".csv" and text.lstrip().startswith("{"))
    raw = _jsonl_records(path, text) if is_jsonl else _csv_records(path, text)
    return [
        LogEntry(seq, f"{path.name}:{line}", *fields)
        for seq, (line, fields) in enumerate(_answered(path, raw), start=1)
    ]


def entries_from_store(records: Iterable[Mapping[str, Any]]) -> list[LogEntry]:
    """The answered records of the guard's own log (``StateStore.log()``), oldest first."""
    entries: list[LogEntry] = []
    for record in records:
        if record.get("decision") != "answered":
            continue
        ts = record.get("ts")
        entries.append(
            LogEntry(
                seq=len(entries) + 1,
                ref=f"store record {record.get('id')}",
                analyst=str(record.get("analyst")),
                time=_naive_utc(ts) if isinstance(ts, dt.datetime) else None,
                sql=str(record.get("sql")),
                data_version=record.get("data_version"),
                answer=_answer(record.get("rows"), record.get("flags"), record.get("levels")),
            )
        )
    return entries


_Fields = tuple[str, dt.datetime | None, str, str | None, Answer | None]


def _answered(path: Path, records: Iterator[tuple[int, Mapping[str, Any]]]) -> Iterator[tuple[int, _Fields]]:
    """(line, fields) of each record that was answered, checked."""
    for line, record in records:
        where = f"{path}:{line}"
        decision = record.get("decision")
        if decision not in (None, "", "answered"):
            continue
        analyst = _text(record.get("analyst"), "analyst", where)
        sql = _text(record.get("sql"), "sql", where)
        time_key = next((k for k in _TIME_KEYS if k in record), None)
        time = _time(record.get(time_key), where) if time_key else None
        version = record.get("data_version")
        fields = (
            analyst,
            time,
            sql,
            version if isinstance(version, str) else None,
            _answer(record.get("rows"), record.get("flags"), record.get("levels")),
        )
        yield line, fields


def _csv_records(path: Path, text: str) -> Iterator[tuple[int, Mapping[str, Any]]]:
    reader = csv.reader(text.splitlines(keepends=True), strict=True)
    line = 1
    try:
        header = next(reader, None)
        if header is None:
            raise LogFileError(f"{path}: the file is empty: a CSV log needs a header analyst,time,sql")
        names = [h.strip().lower() for h in header]
        _require_columns(path, names)
        line = reader.line_num + 1
        for row in reader:
            if row:
                if len(row) != len(names):
                    raise LogFileError(
                        f"{path}:{line}: expected {len(names)} fields ({', '.join(names)}), found "
                        f"{len(row)}: quote SQL that contains commas"
                    )
                yield line, dict(zip(names, row, strict=True))
            line = reader.line_num + 1
    except csv.Error as exc:
        raise LogFileError(
            f"{path}:{line}: malformed CSV ({exc}): check the quoting of this record"
        ) from None


def _require_columns(path: Path, names: list[str]) -> None:
    missing = [n for n in ("analyst", "sql") if n not in names]
    if not any(k in names for k in _TIME_KEYS):
        missing.append("time (or ts)")
    if missing:
        raise LogFileError(
            f"{path}:1: the header lacks the column(s) {', '.join(missing)} (found: "
            f"{', '.join(names) or 'none'}); a CSV log needs analyst, time and sql"
        )


def _jsonl_records(path: Path, text: str) -> Iterator[tuple[int, Mapping[str, Any]]]:
    for line, content in enumerate(text.splitlines(), start=1):
        if not content.strip():
            continue
        try:
            record = json.loads(content)
        except ValueError as exc:
            raise LogFileError(f"{path}:{line}: not valid JSON ({exc})") from None
        if not isinstance(record, dict):
            raise LogFileError(
                f"{path}:{line}: expected a JSON object with analyst, time and sql, "
                f"got {type(record).__name__}"
            )
        for key in ("analyst", "sql"):
            if key not in record:
                raise LogFileError(f"{path}:{line}: the record lacks the key {key!r}")
        yield line, record


def _text(value: Any, key: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise LogFileError(f"{where}: {key} must be a non-empty text, got {value!r}")
    return value.strip()


def _time(value: Any, where: str) -> dt.datetime | None:
    """Naive UTC from ISO 8601 text or epoch seconds; None for an empty value."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise LogFileError(f"{where}: time must be ISO 8601 text or epoch seconds, got {value!r}")
    if isinstance(value, int | float):
        try:
            return dt.datetime.fromtimestamp(value, dt.UTC).replace(tzinfo=None)
        except (OverflowError, OSError, ValueError):
            raise LogFileError(f"{where}: time {value!r} is out of range") from None
    if isinstance(value, str):
        text = value.strip()
        try:
            return (
                _time(float(text), where)
                if _EPOCH.fullmatch(text)
                else _naive_utc(dt.datetime.fromisoformat(text))
            )
        except ValueError:
            pass
    raise LogFileError(
        f"{where}: time {value!r} is not ISO 8601 (e.g. 2024-05-01T12:30:00Z) or epoch seconds"
    )


def _naive_utc(value: dt.datetime) -> dt.datetime:
    if value.tzinfo is None:
        return value
    return value.astimezone(dt.UTC).replace(tzinfo=None)


def _answer(rows: Any, flags: Any, levels: Any = None) -> Answer | None:
    """The published answer, when the record holds one with a flag for every value."""
    if not isinstance(rows, list) or not isinstance(flags, list) or len(rows) != len(flags):
        return None
    pairs = zip(rows, flags, strict=True)
    if not all(isinstance(r, list) and isinstance(f, list) and len(r) == len(f) for r, f in pairs):
        return None
    return Answer(
        tuple(tuple(r) for r in rows),
        tuple(tuple(str(x) for x in f) for f in flags),
        _levels(levels, len(rows)),
    )


def _levels(levels: Any, rows: int) -> tuple[tuple[str, ...], ...] | None:
    """Each row's grouping set from a record's ``levels`` (``ProtectedResult.logged_levels``),
    or None when it has none or not one for each of its ``rows``: the audit then matches
    rows by their keys alone, as for a log written before levels were kept."""
    if not isinstance(levels, dict):
        return None
    sets, indexes = levels.get("sets"), levels.get("rows")
    if not isinstance(sets, list) or not isinstance(indexes, list) or len(indexes) != rows:
        return None
    if not all(isinstance(s, list) and all(isinstance(k, str) for k in s) for s in sets):
        return None
    named = [tuple(s) for s in sets]
    if not all(type(i) is int and 0 <= i < len(named) for i in indexes):
        return None
    return tuple(named[i] for i in indexes)
