"""The endpoint's pure parts: value codecs, statement classification, settings, SCRAM."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
from decimal import Decimal

import pytest

from guard.policy.credentials import make_verifier, parse_verifier
from guard.server.pgwire.scram import ScramExchange
from guard.server.pgwire.settings import SessionSettings
from guard.server.pgwire.sqlstate import SqlError
from guard.server.pgwire.statements import Kind, classify, split
from guard.server.pgwire.types import by_name, numeric_typmod, pg_type_of_engine
from guard.server.pgwire.values import BINARY, TEXT, decode_parameter, encode_value


@pytest.mark.parametrize(
    "number",
    [Decimal("0"), Decimal("358000"), Decimal("-12.5"), Decimal("0.0001"), Decimal("123456789.123456789")],
)
def test_numeric_binary_round_trip(number: Decimal) -> None:
    numeric = by_name("numeric")
    assert decode_parameter(encode_value(number, numeric, BINARY), numeric, BINARY, 1) == number


@pytest.mark.parametrize(
    ("value", "type_name", "text"),
    [
        (True, "bool", "t"),
        (71600.0, "float8", "71600"),
        (0.1, "float8", "0.1"),
        (float("inf"), "float8", "Infinity"),
        (1e16, "numeric", "10000000000000000"),
        (5.0, "int8", "5"),
        (dt.date(2020, 1, 31), "date", "2020-01-31"),
        (dt.datetime(2020, 1, 31, 13, 45), "timestamp", "2020-01-31 13:45:00"),
        (["a", "b c", None], "_text", '{a,"b c",NULL}'),
    ],
)
def test_text_encoding_is_postgresqls(value: object, type_name: str, text: str) -> None:
    assert encode_value(value, by_name(type_name), TEXT) == text.encode()


def test_a_value_that_does_not_fit_its_column_is_an_error() -> None:
    with pytest.raises(SqlError):
        encode_value(2.5, by_name("int8"), TEXT)
    with pytest.raises(SqlError, match="binary result format is not supported"):
        encode_value(["a"], by_name("_text"), BINARY)


@pytest.mark.parametrize(
    ("data", "type_name", "fmt", "expected"),
    [
        (b"42", "int8", TEXT, 42),
        (b"\x00\x00\x00\x00\x00\x00\x00\x2a", "int8", BINARY, 42),
        (b"2020-01-31", "date", TEXT, dt.date(2020, 1, 31)),
        (b"\x00\x00\x1c\xd7", "date", BINARY, dt.date(2020, 3, 19)),
        (b"true", "bool", TEXT, True),
        (b"Male", "text", TEXT, "Male"),
        (b"2020-01-31 12:00:00+02", "timestamptz", TEXT, dt.datetime(2020, 1, 31, 10)),
    ],
)
def test_parameter_decoding(data: bytes, type_name: str, fmt: int, expected: object) -> None:
    assert decode_parameter(data, by_name(type_name), fmt, 1) == expected


def test_invalid_parameter_text_is_22p02() -> None:
    with pytest.raises(SqlError) as caught:
        decode_parameter(b"twelve", by_name("int4"), TEXT, 2)
    assert caught.value.sqlstate == "22P02" and "$2" in caught.value.message


@pytest.mark.parametrize(
    ("engine", "pg", "typmod"),
    [
        ("BIGINT", "int8", -1),
        ("HUGEINT", "numeric", -1),
        ("DECIMAL(10,2)", "numeric", (10 << 16 | 2) + 4),
        ("DOUBLE", "float8", -1),
        ("VARCHAR", "text", -1),
        ("DATE", "date", -1),
        ("BOOLEAN", "bool", -1),
        ("INTEGER", "int4", -1),
        ("VARCHAR[]", "_text", -1),
        ("STRUCT(a INTEGER)", "text", -1),
    ],
)
def test_engine_types_map_to_postgresql_types(engine: str, pg: str, typmod: int) -> None:
    assert pg_type_of_engine(engine).name == pg
    assert numeric_typmod(engine) == typmod


def test_split_respects_quotes_and_dollar_quoting() -> None:
    assert split("SET x = 'a;b'; SELECT $$c;d$$ ; -- e;\n ;") == ["SET x = 'a;b'", " SELECT $$c;d$$ "]


@pytest.mark.parametrize(
    ("sql", "kind", "detail"),
    [
        ("SET TIME ZONE 'UTC'", Kind.SET, (("TimeZone", "UTC"),)),
        ('set search_path to "$user", public', Kind.SET, (("search_path", '"$user", public'),)),
        ("SET extra_float_digits = -3", Kind.SET, (("extra_float_digits", "-3"),)),
        ("SET application_name TO DEFAULT", Kind.SET, (("application_name", None),)),
        ("SHOW transaction isolation level", Kind.SHOW, "transaction_isolation"),
        ("START TRANSACTION ISOLATION LEVEL SERIALIZABLE", Kind.BEGIN, "BEGIN"),
        ("ROLLBACK TO SAVEPOINT s1", Kind.ROLLBACK_TO, "ROLLBACK"),
        ("end", Kind.COMMIT, "COMMIT"),
        ("/* c */ (SELECT 1)", Kind.QUERY, ""),
        ("INSERT INTO students VALUES (1)", Kind.OTHER, ""),
        ("  -- only a comment", Kind.EMPTY, ""),
    ],
)
def test_statement_classification(sql: str, kind: Kind, detail: object) -> None:
    statement = classify(sql)
    assert statement.kind is kind
    if kind is Kind.SET:
        assert statement.assignments == detail
    elif kind is Kind.SHOW:
        assert statement.name == detail
    else:
        assert statement.tag == detail


@pytest.mark.parametrize("sql", ["SET ROLE bob", "SET SESSION AUTHORIZATION bob", "set local role bob"])
def test_the_session_user_cannot_change(sql: str) -> None:
    with pytest.raises(SqlError) as caught:
        classify(sql)
    assert caught.value.sqlstate == "42501"


def test_settings_report_changes_and_refuse_fixed_values() -> None:
    settings = SessionSettings("alice")
    assert dict(settings.reported())["session_authorization"] == "alice"
    assert settings.set("DateStyle", "iso, dmy") == ("DateStyle", "ISO, DMY")
    assert settings.set("statement_timeout", "5s") is None  # not reported
    assert settings.set("my.custom", "x") is None and settings.get("my.custom") == ("my.custom", "x")
    for name, value in [
        ("server_version", "17"),
        ("standard_conforming_strings", "off"),
        ("DateStyle", "SQL"),
    ]:
        with pytest.raises(SqlError):
            settings.set(name, value)
    settings.apply_startup({"user": "alice", "options": "-c extra_float_digits=2 --TimeZone=Europe/Paris"})
    assert settings.get("timezone")[1] == "Europe/Paris" and settings.get("extra_float_digits")[1] == "2"


def _client_final(password: str, server_first: str, first_bare: str) -> tuple[str, bytes]:
    attributes = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        "sha256", password.encode(), base64.b64decode(attributes["s"]), int(attributes["i"])
    )
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    without_proof = f"c=biws,r={attributes['r']}"
    message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.sha256(client_key).digest(), message, hashlib.sha256).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    expected = b"v=" + base64.b64encode(hmac.new(server_key, message, hashlib.sha256).digest())
    return f"{without_proof},p={proof}", expected


@pytest.mark.parametrize(("password", "accepted"), [("s3cret", True), ("wrong", False)])
def test_scram_exchange_against_a_stored_verifier(password: str, accepted: bool) -> None:
    verifier = parse_verifier(make_verifier("s3cret", iterations=64))
    exchange = ScramExchange(verifier, "alice", b"k" * 32)
    server_first = exchange.server_first(b"n,,n=,r=abc").decode()
    assert server_first.startswith("r=abc") and ",i=64" in server_first
    final, expected = _client_final(password, server_first, "n=,r=abc")
    assert exchange.server_final(final.encode()) == (expected if accepted else None)


def test_unknown_users_get_a_stable_fake_salt_and_always_fail() -> None:
    first = ScramExchange(None, "mallory", b"k" * 32).server_first(b"n,,n=,r=abc").decode()
    again = ScramExchange(None, "mallory", b"k" * 32).server_first(b"n,,n=,r=xyz").decode()
    assert first.split(",")[1:] == again.split(",")[1:]  # same salt and count: nothing to compare
    exchange = ScramExchange(None, "mallory", b"k" * 32)
    server_first = exchange.server_first(b"n,,n=,r=abc").decode()
    final, _ = _client_final("anything", server_first, "n=,r=abc")
    assert exchange.server_final(final.encode()) is None
