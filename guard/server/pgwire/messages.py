"""The frontend/backend protocol v3 message codec: frames in, messages out. No I/O policy.

Every frontend message is read into a frozen dataclass; every backend message is built
by one function returning its bytes. Sizes are checked before anything is allocated:
a start-up packet is at most 10 000 bytes (as in PostgreSQL), any other message at most
:data:`MAX_MESSAGE` bytes.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from guard.server.pgwire import sqlstate
from guard.server.pgwire.sqlstate import SqlError

__all__ = [
    "BIND_COMPLETE",
    "CANCEL_REQUEST",
    "CLOSE_COMPLETE",
    "EMPTY_QUERY_RESPONSE",
    "GSSENC_REQUEST",
    "MAX_MESSAGE",
    "MAX_STARTUP",
    "NO_DATA",
    "PARSE_COMPLETE",
    "PORTAL_SUSPENDED",
    "PROTOCOL_3_0",
    "SSL_REQUEST",
    "Bind",
    "Close",
    "Describe",
    "Execute",
    "Field",
    "Flush",
    "FrontendMessage",
    "Parse",
    "Query",
    "StartupPacket",
    "Sync",
    "Terminate",
    "authentication",
    "authentication_sasl",
    "backend_key_data",
    "command_complete",
    "data_row",
    "decode_frontend",
    "decode_sasl_initial",
    "error_response",
    "negotiate_protocol_version",
    "notice_or_error",
    "notice_response",
    "parameter_description",
    "parameter_status",
    "read_message",
    "read_startup",
    "ready_for_query",
    "row_description",
]

PROTOCOL_3_0 = 3 << 16
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102

MAX_STARTUP = 10_000
#: larger than any statement the guard accepts (its SQL limit is far smaller) with values
MAX_MESSAGE = 16 * 1024 * 1024


# --- reading -------------------------------------------------------------------------


class _Buffer:
    """A cursor over one message body; running past the end is a protocol violation."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def int16(self) -> int:
        return int(self._unpack("!h"))

    def int32(self) -> int:
        return int(self._unpack("!i"))

    def uint32(self) -> int:
        return int(self._unpack("!I"))

    def byte(self) -> bytes:
        return self.bytes(1)

    def bytes(self, count: int) -> bytes:
        if count < 0 or self.at + count > len(self.data):
            raise _malformed()
        chunk = self.data[self.at : self.at + count]
        self.at += count
        return chunk

    def cstring(self) -> str:
        end = self.data.find(b"\x00", self.at)
        if end < 0:
            raise _malformed()
        text = self.data[self.at : end]
        self.at = end + 1
        try:
            return text.decode("utf-8")
        except UnicodeDecodeError:
            # as PostgreSQL answers it: an error, and the session goes on
            raise SqlError(
                sqlstate.CHARACTER_NOT_IN_REPERTOIRE,
                'invalid byte sequence for encoding "UTF8": send the text as UTF-8',
            ) from None

    def _unpack(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.at + size > len(self.data):
            raise _malformed()
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += size
        return int(value)


def _malformed() -> SqlError:
    return SqlError(sqlstate.PROTOCOL_VIOLATION, "malformed message: its length does not match its content")


@dataclass(frozen=True)
class StartupPacket:
    """The first packet of a connection: a request code and, for a start-up, parameters."""

    code: int
    parameters: Mapping[str, str]
    #: CancelRequest only: the target session's process id and secret key
    process_id: int = 0
    secret_key: int = 0


async def read_startup(reader: asyncio.StreamReader) -> StartupPacket:
    """Read a start-up, SSL, GSSENC or cancel request (they have no type byte)."""
    (length,) = struct.unpack("!i", await reader.readexactly(4))
    if not 8 <= length <= MAX_STARTUP:
        raise SqlError(sqlstate.PROTOCOL_VIOLATION, "invalid length of startup packet", fatal=True)
    body = _Buffer(await reader.readexactly(length - 4))
    code = body.int32()
    if code == CANCEL_REQUEST:
        return StartupPacket(code, {}, body.int32(), body.int32())
    if code in (SSL_REQUEST, GSSENC_REQUEST) or code >> 16 != 3:
        return StartupPacket(code, {})
    parameters: dict[str, str] = {}
    while True:
        name = body.cstring()
        if not name:
            break
        parameters[name] = body.cstring()
    return StartupPacket(code, parameters)


async def read_message(reader: asyncio.StreamReader, limit: int = MAX_MESSAGE) -> tuple[bytes, bytes]:
    """One typed message of at most ``limit`` bytes: (type byte, body). EOF raises
    ``asyncio.IncompleteReadError``; a longer message is a fatal protocol violation."""
    header = await reader.readexactly(5)
    kind = header[:1]
    (length,) = struct.unpack("!i", header[1:])
    if not 4 <= length <= limit:
        raise SqlError(sqlstate.PROTOCOL_VIOLATION, f"invalid message length {length}", fatal=True)
    return kind, await reader.readexactly(length - 4)


# --- frontend messages -------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    sql: str


@dataclass(frozen=True)
class Parse:
    statement: str
    sql: str
    #: declared parameter type OIDs (0: unspecified)
    parameter_types: tuple[int, ...]


@dataclass(frozen=True)
class Bind:
    portal: str
    statement: str
    parameter_formats: tuple[int, ...]
    values: tuple[bytes | None, ...]
    result_formats: tuple[int, ...]


@dataclass(frozen=True)
class Describe:
    #: b"S" statement or b"P" portal
    kind: bytes
    name: str


@dataclass(frozen=True)
class Execute:
    portal: str
    #: 0: all rows
    max_rows: int


@dataclass(frozen=True)
class Close:
    kind: bytes
    name: str


@dataclass(frozen=True)
class Sync:
    pass


@dataclass(frozen=True)
class Flush:
    pass


@dataclass(frozen=True)
class Terminate:
    pass


FrontendMessage = Query | Parse | Bind | Describe | Execute | Close | Sync | Flush | Terminate


def _parse(body: _Buffer) -> Parse:
    name, sql = body.cstring(), body.cstring()
    return Parse(name, sql, tuple(body.uint32() for _ in range(body.int16())))


def _bind(body: _Buffer) -> Bind:
    portal, statement = body.cstring(), body.cstring()
    formats = tuple(body.int16() for _ in range(body.int16()))
    values: list[bytes | None] = []
    for _ in range(body.int16()):
        size = body.int32()
        values.append(None if size == -1 else body.bytes(size))
    results = tuple(body.int16() for _ in range(body.int16()))
    return Bind(portal, statement, formats, tuple(values), results)


def _kind_and_name(body: _Buffer) -> tuple[bytes, str]:
    kind = body.byte()
    if kind not in (b"S", b"P"):
        raise SqlError(sqlstate.PROTOCOL_VIOLATION, f"invalid Describe/Close target {kind!r}: S or P")
    return kind, body.cstring()


def decode_frontend(kind: bytes, data: bytes) -> FrontendMessage:
    """The message of type ``kind`` with body ``data``.

    Raises:
        SqlError: an unknown type, or a body that does not match its type.
    """
    body = _Buffer(data)
    if kind == b"Q":
        return Query(body.cstring())
    if kind == b"P":
        return _parse(body)
    if kind == b"B":
        return _bind(body)
    if kind == b"D":
        return Describe(*_kind_and_name(body))
    if kind == b"E":
        return Execute(body.cstring(), body.int32())
    if kind == b"C":
        return Close(*_kind_and_name(body))
    if kind == b"S":
        return Sync()
    if kind == b"H":
        return Flush()
    if kind == b"X":
        return Terminate()
    if kind == b"F":
        raise SqlError(sqlstate.FEATURE_NOT_SUPPORTED, "the function call protocol is not supported")
    if kind in (b"d", b"c", b"f"):
        raise SqlError(sqlstate.FEATURE_NOT_SUPPORTED, "COPY is not supported: the guard answers aggregates")
    raise SqlError(sqlstate.PROTOCOL_VIOLATION, f"invalid frontend message type {kind!r}")


def decode_sasl_initial(data: bytes) -> tuple[str, bytes]:
    """SASLInitialResponse: (mechanism, client-first-message)."""
    body = _Buffer(data)
    mechanism = body.cstring()
    size = body.int32()
    return mechanism, b"" if size == -1 else body.bytes(size)


# --- backend messages --------------------------------------------------------------


def _message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def _cstring(text: str) -> bytes:
    return text.encode("utf-8") + b"\x00"


def authentication(code: int, data: bytes = b"") -> bytes:
    """AuthenticationOk (0), SASL (10), SASLContinue (11), SASLFinal (12)."""
    return _message(b"R", struct.pack("!i", code) + data)


def authentication_sasl(mechanisms: Iterable[str]) -> bytes:
    return authentication(10, b"".join(_cstring(m) for m in mechanisms) + b"\x00")


def parameter_status(name: str, value: str) -> bytes:
    return _message(b"S", _cstring(name) + _cstring(value))


def backend_key_data(process_id: int, secret_key: int) -> bytes:
    return _message(b"K", struct.pack("!ii", process_id, secret_key))


def negotiate_protocol_version(newest_minor: int, unrecognized: Sequence[str]) -> bytes:
    options = b"".join(_cstring(o) for o in unrecognized)
    return _message(b"v", struct.pack("!ii", newest_minor, len(unrecognized)) + options)


def ready_for_query(status: bytes) -> bytes:
    return _message(b"Z", status)


@dataclass(frozen=True)
class Field:
    """One column of a RowDescription."""

    name: str
    type_oid: int
    type_size: int
    type_modifier: int = -1
    format: int = 0


def row_description(fields: Sequence[Field]) -> bytes:
    parts = [struct.pack("!h", len(fields))]
    for f in fields:
        # table OID and attribute number 0: a computed column, not a table's (JDBC then
        # does not ask the catalog which table each column came from)
        parts.append(
            _cstring(f.name)
            + struct.pack("!ihihih", 0, 0, f.type_oid, f.type_size, f.type_modifier, f.format)
        )
    return _message(b"T", b"".join(parts))


def data_row(values: Sequence[bytes | None]) -> bytes:
    parts = [struct.pack("!h", len(values))]
    for value in values:
        parts.append(struct.pack("!i", -1) if value is None else struct.pack("!i", len(value)) + value)
    return _message(b"D", b"".join(parts))


def parameter_description(type_oids: Sequence[int]) -> bytes:
    return _message(b"t", struct.pack(f"!h{len(type_oids)}I", len(type_oids), *type_oids))


def command_complete(tag: str) -> bytes:
    return _message(b"C", _cstring(tag))


def notice_or_error(kind: bytes, severity: str, code: str, message: str, hint: str | None = None) -> bytes:
    fields = [b"S" + _cstring(severity), b"V" + _cstring(severity), b"C" + _cstring(code)]
    fields.append(b"M" + _cstring(message))
    if hint:
        fields.append(b"H" + _cstring(hint))
    return _message(kind, b"".join(fields) + b"\x00")


def error_response(code: str, message: str, *, fatal: bool = False, hint: str | None = None) -> bytes:
    return notice_or_error(b"E", "FATAL" if fatal else "ERROR", code, message, hint)


def notice_response(message: str, *, severity: str = "NOTICE", code: str = "00000") -> bytes:
    return notice_or_error(b"N", severity, code, message)


EMPTY_QUERY_RESPONSE = _message(b"I")
PARSE_COMPLETE = _message(b"1")
BIND_COMPLETE = _message(b"2")
CLOSE_COMPLETE = _message(b"3")
NO_DATA = _message(b"n")
PORTAL_SUSPENDED = _message(b"s")
