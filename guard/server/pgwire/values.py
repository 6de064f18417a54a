"""Values on the wire: results encoded, parameters decoded, in text and binary formats.

Text is PostgreSQL's output syntax (``t``/``f``, ISO dates, ``Infinity``); binary is
the network-order ``send``/``recv`` form of each type. Every type the endpoint sends
has a text encoder; binary covers the scalars drivers request (booleans, integers,
floats, numeric, text, dates and times, uuid, bytea). Asking for binary of another
type gets a clear error instead of wrong bytes.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
import uuid
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from guard.query.parameters import Parameter
from guard.server.pgwire import sqlstate
from guard.server.pgwire.sqlstate import SqlError
from guard.server.pgwire.types import PgType, by_oid

__all__ = ["BINARY", "TEXT", "decode_parameter", "encode_value", "supports_binary"]

TEXT = 0
BINARY = 1

_EPOCH_DATE = dt.date(2000, 1, 1)
_EPOCH = dt.datetime(2000, 1, 1)
_EPOCH_UTC = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)

_INTEGERS = frozenset({"int2", "int4", "int8", "oid", "regproc", "regclass", "regtype"})
_FLOATS = frozenset({"float4", "float8"})
_STRINGS = frozenset({"text", "varchar", "bpchar", "name", "char", "unknown", "json"})


def encode_value(value: Any, pg_type: PgType, fmt: int) -> bytes:
    """``value`` (a Python value from a result) in ``pg_type``'s text or binary form.

    Raises:
        SqlError: binary format requested for a type without a binary encoder, or a
            value that does not fit its column's type.
    """
    if fmt == BINARY:
        encoder = _BINARY_ENCODERS.get(pg_type.name)
        if encoder is None:
            raise SqlError(
                sqlstate.FEATURE_NOT_SUPPORTED,
                f"binary result format is not supported for type {pg_type.sql_name}: request text format",
            )
        return encoder(value)
    return _text(value, pg_type).encode("utf-8")


def supports_binary(pg_type: PgType) -> bool:
    return pg_type.name in _BINARY_ENCODERS


def _text(value: Any, pg_type: PgType) -> str:
    name = pg_type.name
    if pg_type.category == "A" and isinstance(value, list | tuple):
        element = by_oid(pg_type.element_oid) or by_oid(25)
        assert element is not None
        return _array_text(value, element)
    if isinstance(value, bool):
        return ("t" if value else "f") if name == "bool" else ("true" if value else "false")
    if name in _INTEGERS:
        return str(_whole(value, pg_type))
    if name in _FLOATS:
        return _float_text(float(value))
    if name == "numeric":
        return _numeric_text(value)
    if isinstance(value, dt.datetime):
        text = value.isoformat(sep=" ")
        return text + "+00" if name == "timestamptz" and value.tzinfo is None else text
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return _interval_text(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    if name in ("json", "jsonb") and not isinstance(value, str):
        return json.dumps(value)
    return str(value)


def _whole(value: Any, pg_type: PgType) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, float | Decimal) and math.isfinite(value) and value == int(value):
        return int(value)
    raise SqlError(
        sqlstate.INTERNAL_ERROR, f"a value of the result does not fit its column type {pg_type.sql_name}"
    )


def _float_text(number: float) -> str:
    # PostgreSQL prints the shortest exact form, without Python's trailing ".0"
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    text = repr(number)
    return text[:-2] if text.endswith(".0") else text


def _numeric_text(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    number = value if isinstance(value, Decimal) else Decimal(repr(float(value)))
    if number.is_nan():
        return "NaN"
    if number.is_infinite():
        return "Infinity" if number > 0 else "-Infinity"
    return format(number, "f")  # numeric never prints an exponent


def _interval_text(value: dt.timedelta) -> str:
    seconds = value.seconds + value.microseconds / 1_000_000
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{int(hours):02d}:{int(minutes):02d}:{secs:09.6f}".rstrip("0").rstrip(".")
    return f"{value.days} days {clock}" if value.days else clock


def _array_text(values: list[Any] | tuple[Any, ...], element: PgType) -> str:
    items = []
    for item in values:
        if item is None:
            items.append("NULL")
            continue
        text = _text(item, element)
        if text == "" or text.upper() == "NULL" or any(c in text for c in ' {},"\\\t\n'):
            text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        items.append(text)
    return "{" + ",".join(items) + "}"


# --- binary encoders -----------------------------------------------------------------


def _int_encoder(fmt: str) -> Callable[[Any], bytes]:
    size = struct.calcsize(fmt)
    pg_type = by_oid({2: 21, 4: 23, 8: 20}[size])
    assert pg_type is not None
    return lambda value: struct.pack(fmt, _whole(value, pg_type))


def _numeric_binary(value: Any) -> bytes:
    number = (
        value if isinstance(value, Decimal) else Decimal(value if isinstance(value, int) else repr(value))
    )
    if number.is_nan():
        return struct.pack("!hhHh", 0, 0, 0xC000, 0)
    if number.is_infinite():
        return struct.pack("!hhHh", 0, 0, 0xD000 if number > 0 else 0xF000, 0)
    exponent = number.as_tuple().exponent
    assert isinstance(exponent, int)
    scale = max(0, -exponent)
    whole, _, fraction = format(abs(number), "f").partition(".")
    whole = whole.lstrip("0")
    whole = "0" * (-len(whole) % 4) + whole
    fraction += "0" * (-len(fraction) % 4)
    digits = [int(whole[i : i + 4]) for i in range(0, len(whole), 4)]
    weight = len(digits) - 1
    digits += [int(fraction[i : i + 4]) for i in range(0, len(fraction), 4)]
    while digits and digits[0] == 0:
        digits.pop(0)
        weight -= 1
    while digits and digits[-1] == 0:
        digits.pop()
    if not digits:
        weight = 0
    sign = 0x4000 if number < 0 else 0
    return struct.pack(f"!hhHh{len(digits)}h", len(digits), weight, sign, scale, *digits)


def _timestamp_binary(value: dt.datetime) -> bytes:
    delta = value - (_EPOCH_UTC if value.tzinfo is not None else _EPOCH)
    return struct.pack("!q", (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)


def _time_binary(value: dt.time) -> bytes:
    micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
    return struct.pack("!q", micros)


def _string_binary(value: Any) -> bytes:
    return (value if isinstance(value, str) else str(value)).encode("utf-8")


_BINARY_ENCODERS: dict[str, Callable[[Any], bytes]] = {
    "bool": lambda value: b"\x01" if value else b"\x00",
    "int2": _int_encoder("!h"),
    "int4": _int_encoder("!i"),
    "int8": _int_encoder("!q"),
    "float4": lambda value: struct.pack("!f", float(value)),
    "float8": lambda value: struct.pack("!d", float(value)),
    "numeric": _numeric_binary,
    "text": _string_binary,
    "varchar": _string_binary,
    "bpchar": _string_binary,
    "name": _string_binary,
    "json": lambda value: (value if isinstance(value, str) else json.dumps(value)).encode("utf-8"),
    "bytea": lambda value: bytes(value),
    "date": lambda value: struct.pack("!i", (value - _EPOCH_DATE).days),
    "timestamp": _timestamp_binary,
    "timestamptz": _timestamp_binary,
    "time": _time_binary,
    "uuid": lambda value: (value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))).bytes,
}


# --- parameters ----------------------------------------------------------------------


def decode_parameter(data: bytes | None, pg_type: PgType, fmt: int, position: int) -> Parameter:
    """A Bind parameter as the Python value the guard binds (``guard.query.parameters``).

    ``pg_type`` is the parameter's declared type, or the one inferred from where the
    placeholder stands; ``text`` when neither says.

    Raises:
        SqlError: the bytes are not a valid value of ``pg_type``, or binary format was
            sent for a type without a binary decoder.
    """
    if data is None:
        return None
    if fmt == BINARY:
        decoder = _BINARY_DECODERS.get(pg_type.name)
        if decoder is None:
            raise SqlError(
                sqlstate.FEATURE_NOT_SUPPORTED,
                f"parameter ${position}: binary format is not supported for type {pg_type.sql_name}; "
                "send it in text format",
            )
        try:
            return decoder(data)
        except (struct.error, ValueError, UnicodeDecodeError, InvalidOperation):
            raise SqlError(
                sqlstate.INVALID_BINARY_REPRESENTATION,
                f"parameter ${position}: invalid binary value for type {pg_type.sql_name}",
            ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SqlError(
            sqlstate.INVALID_TEXT_REPRESENTATION, f"parameter ${position} is not valid UTF-8"
        ) from None
    parser = _TEXT_DECODERS.get(pg_type.name)
    if parser is None:
        return text
    try:
        return parser(text)
    except (ValueError, InvalidOperation):
        raise SqlError(
            sqlstate.INVALID_TEXT_REPRESENTATION,
            f"invalid input syntax for type {pg_type.sql_name}: {text[:40]!r} (parameter ${position})",
        ) from None


_TRUE = frozenset({"t", "true", "y", "yes", "on", "1"})
_FALSE = frozenset({"f", "false", "n", "no", "off", "0"})


def _bool_text(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(text)


def _timestamp_text(text: str) -> dt.datetime:
    value = dt.datetime.fromisoformat(text.strip())
    # the guard compares naive timestamps; an offset is applied, then dropped
    return value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo is not None else value


_TEXT_DECODERS: dict[str, Callable[[str], Parameter]] = {
    "bool": _bool_text,
    "int2": int,
    "int4": int,
    "int8": int,
    "oid": int,
    "float4": float,  # float() reads NaN and Infinity as PostgreSQL writes them
    "float8": float,
    "numeric": Decimal,
    "date": lambda text: dt.date.fromisoformat(text.strip()),
    "timestamp": _timestamp_text,
    "timestamptz": _timestamp_text,
}


def _numeric_from_binary(data: bytes) -> Decimal:
    count, weight, sign, scale = struct.unpack_from("!hhHh", data)
    if sign == 0xC000:
        return Decimal("NaN")
    if sign in (0xD000, 0xF000):
        return Decimal("Infinity") if sign == 0xD000 else Decimal("-Infinity")
    digits = struct.unpack_from(f"!{count}h", data, 8)
    total = Decimal(0)
    for i, digit in enumerate(digits):
        total += Decimal(digit).scaleb(4 * (weight - i))
    total = total.quantize(Decimal(1).scaleb(-scale)) if scale else total
    return -total if sign == 0x4000 else total


def _timestamp_from_binary(data: bytes) -> dt.datetime:
    (micros,) = struct.unpack("!q", data)
    return _EPOCH + dt.timedelta(microseconds=micros)


_BINARY_DECODERS: dict[str, Callable[[bytes], Parameter]] = {
    "bool": lambda data: data != b"\x00",
    "int2": lambda data: int(struct.unpack("!h", data)[0]),
    "int4": lambda data: int(struct.unpack("!i", data)[0]),
    "int8": lambda data: int(struct.unpack("!q", data)[0]),
    "oid": lambda data: int(struct.unpack("!I", data)[0]),
    "float4": lambda data: float(struct.unpack("!f", data)[0]),
    "float8": lambda data: float(struct.unpack("!d", data)[0]),
    "numeric": _numeric_from_binary,
    "date": lambda data: _EPOCH_DATE + dt.timedelta(days=struct.unpack("!i", data)[0]),
    "timestamp": _timestamp_from_binary,
    "timestamptz": _timestamp_from_binary,  # UTC microseconds: naive UTC for the guard
    "uuid": lambda data: str(uuid.UUID(bytes=data)),
    **{name: (lambda data: data.decode("utf-8")) for name in _STRINGS},
    "jsonb": lambda data: data[1:].decode("utf-8"),
}
