"""Protocol v3 at the message level, with a raw client: what each request is answered with,
and how often the guard is asked."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest

INT8, TEXT, NUMERIC, FLOAT8 = 20, 25, 1700, 701
COUNT_BY_SEX = "SELECT COUNT(*) FROM students WHERE sex = $1"


def test_statement_describe_runs_nothing(students: Any, wire: Callable[..., Any]) -> None:
    client = wire(students)
    before = students.log_size()
    client.parse("SELECT major, SUM(income), AVG(income) FROM students WHERE sex = $1 GROUP BY major")
    client.describe(b"S")
    reply = client.sync()
    assert reply.kinds() == b"1tTZ"
    assert reply.parameter_types() == [TEXT]  # sex is VARCHAR
    assert [(name, oid) for name, oid, _ in reply.columns()] == [
        ("major", TEXT),
        ("sum", NUMERIC),
        ("avg", FLOAT8),
    ]
    assert students.log_size() == before


def test_portal_describe_then_execute_asks_the_guard_once(students: Any, wire: Callable[..., Any]) -> None:
    client = wire(students)
    before = students.log_size()
    client.parse(COUNT_BY_SEX)
    client.bind((b"Male",))
    client.describe(b"P")
    client.execute()
    reply = client.sync()
    assert reply.kinds() == b"12TDCZ"
    assert reply.rows() == [[b"6"]]
    assert students.log_size() == before + 1


def test_statement_describe_bind_execute_uses_the_described_types(
    students: Any, wire: Callable[..., Any]
) -> None:
    client = wire(students)
    client.parse("SELECT COUNT(*) FROM students WHERE class >= $1", name="by_class")
    client.describe(b"S", "by_class")
    described = client.sync()
    assert described.parameter_types() == [INT8]
    client.bind((struct.pack("!q", 1980),), statement="by_class", formats=(1,), results=(1,))
    client.execute()
    reply = client.sync()
    assert reply.kinds() == b"2DCZ"
    assert reply.rows() == [[struct.pack("!q", 4)]]


def test_error_discards_messages_until_sync(students: Any, wire: Callable[..., Any]) -> None:
    client = wire(students)
    before = students.log_size()
    client.parse("SELECT name FROM students")
    client.bind()
    client.execute()
    client.parse(COUNT_BY_SEX)  # discarded: an error came first
    client.bind((b"Male",))
    client.execute()
    reply = client.sync()
    assert reply.kinds() == b"12EZ"
    assert reply.errors()[0]["C"] == "42000"
    assert students.log_size() == before + 1
    assert client.query("SELECT COUNT(*) FROM students").rows() == [[b"9"]]


def test_row_limit_suspends_the_portal(serve: Callable[..., Any], wire: Callable[..., Any]) -> None:
    castro = serve("castro")
    client = wire(castro)
    client.parse("SELECT profession, COUNT(*) FROM castro GROUP BY profession ORDER BY profession")
    client.bind()
    client.execute(max_rows=2)
    client.execute(max_rows=2)
    client.execute(max_rows=2)
    reply = client.sync()
    assert reply.kinds() == b"12DDsDDsDCZ"
    assert [row[0] for row in reply.rows()] == [b"P1", b"P2", b"P3", b"P4", b"P5"]
    assert castro.log_size() == 1


def test_null_parameter_and_wrong_parameter_count(students: Any, wire: Callable[..., Any]) -> None:
    client = wire(students)
    client.parse(COUNT_BY_SEX)
    client.bind((None,))
    client.execute()
    reply = client.sync()
    assert reply.errors()[0]["C"] == "42000"  # the guard: comparisons with NULL are never true
    client.parse(COUNT_BY_SEX)
    client.bind((b"Male", b"Female"))
    reply = client.sync()
    assert reply.errors()[0]["C"] == "08P01"
    assert "supplies 2 parameters" in reply.errors()[0]["M"]


def test_session_commands_in_the_extended_protocol(students: Any, wire: Callable[..., Any]) -> None:
    client = wire(students)
    client.parse("SET TimeZone = 'Europe/Paris'")
    client.describe(b"S")
    client.bind()
    client.execute()
    client.parse("SHOW TimeZone")
    client.bind()
    client.describe(b"P")
    client.execute()
    reply = client.sync()
    assert reply.kinds() == b"1tn2SC12TDCZ"  # ParameterStatus before SET's CommandComplete
    assert reply.rows() == [[b"Europe/Paris"]]
    assert reply.columns() == [("TimeZone", TEXT, 0)]


def test_simple_query_with_several_statements_and_empty_ones(students: Any, wire: Callable[..., Any]) -> None:
    client = wire(students)
    reply = client.query("SET extra_float_digits = 3; SELECT COUNT(*) FROM students; ;")
    assert reply.kinds() == b"CTDCZ"
    assert client.query("  -- nothing\n").kinds() == b"IZ"
    reply = client.query("SELECT COUNT(*) FROM students; SELECT name FROM students; SHOW DateStyle")
    assert reply.kinds() == b"TDCEZ"  # the error ends the string


def test_transaction_status_in_ready_for_query(students: Any, wire: Callable[..., Any]) -> None:
    client = wire(students)
    assert client.query("BEGIN").status() == b"T"
    assert client.query("SELECT name FROM students").status() == b"E"
    assert client.query("SELECT COUNT(*) FROM students").errors()[0]["C"] == "25P02"
    assert client.query("ROLLBACK").status() == b"I"
    reply = client.query("COMMIT")
    assert reply.status() == b"I" and reply.notices()[0]["C"] == "25P01"


def test_encryption_requests_are_declined_without_a_certificate(
    students: Any, wire: Callable[..., Any]
) -> None:
    client = wire(students, login=False)
    client.raw(struct.pack("!ii", 8, 80877104))  # GSSENCRequest
    assert client.read_exactly(1) == b"N"
    client.raw(struct.pack("!ii", 8, 80877103))  # SSLRequest
    assert client.read_exactly(1) == b"N"
    assert client.startup().status() == b"I"


def test_startup_failures_use_their_sqlstates(students: Any, wire: Callable[..., Any]) -> None:
    wrong = wire(students, login=False).startup("alice", "nope")
    unknown = wire(students, login=False).startup("mallory", "nope")
    assert wrong.errors()[0]["C"] == unknown.errors()[0]["C"] == "28P01"
    assert wrong.errors()[0]["M"].replace("alice", "?") == unknown.errors()[0]["M"].replace("mallory", "?")
    database = wire(students, login=False).startup("alice", "alice-demo", database="other")
    assert database.errors()[0]["C"] == "3D000"


def test_cancel_with_a_wrong_key_changes_nothing(students: Any, wire: Callable[..., Any]) -> None:
    client = wire(students)
    canceller = wire(students, login=False)
    canceller.raw(struct.pack("!iiii", 16, 80877102, client.process_id, client.secret_key ^ 1))
    with pytest.raises(ConnectionError):
        canceller.read_exactly(1)  # the server closes a cancel connection without a reply
    assert client.query("SELECT COUNT(*) FROM students").rows() == [[b"9"]]


def test_backend_key_data_differs_per_session(students: Any, wire: Callable[..., Any]) -> None:
    first, second = wire(students), wire(students)
    assert (first.process_id, first.secret_key) != (second.process_id, second.secret_key)


def test_unknown_message_type_ends_the_connection(students: Any, wire: Callable[..., Any]) -> None:
    client = wire(students)
    client.raw(b"?" + struct.pack("!i", 4))
    kind, body = client.read()
    assert kind == b"E" and b"08P01" in body and b"FATAL" in body
    with pytest.raises(ConnectionError):
        client.read()


def test_multiple_statements_cannot_be_prepared(students: Any, wire: Callable[..., Any]) -> None:
    client = wire(students)
    client.parse("SELECT COUNT(*) FROM students; SELECT COUNT(*) FROM students")
    assert client.sync().errors()[0]["C"] == "42601"


def test_unexpected_failures_are_generic_internal_errors(
    serve: Callable[..., Any], wire: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        def __init__(self, guard: Any) -> None:
            self._guard = guard

        def __getattr__(self, name: str) -> Any:
            return getattr(self._guard, name)

        def query(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("secret internals /srv/data.csv")

    broken = serve("students", wrap=Broken)
    client = wire(broken)
    reply = client.query("SELECT COUNT(*) FROM students")
    error = reply.errors()[0]
    assert error["C"] == "XX000"
    assert "secret" not in error["M"] and "see the server log" in error["M"]
    assert "secret internals" in caplog.text  # the details are in the server's log
    assert client.query("SHOW server_version").rows() == [[b"16.0 (statguard)"]]


@pytest.mark.parametrize(
    "garbage",
    [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # not a PostgreSQL client at all
        struct.pack("!ii", 12, 80877102) + b"\x00\x00\x00\x01",  # a cancel request cut short
        struct.pack("!ii", 8, 2 << 16),  # protocol 2
    ],
)
def test_garbage_at_startup_is_refused_and_harmless(
    students: Any, wire: Callable[..., Any], garbage: bytes
) -> None:
    client = wire(students, login=False)
    client.raw(garbage)
    kind, body = client.read()
    assert kind == b"E" and b"FATAL" in body
    assert wire(students).query("SELECT COUNT(*) FROM students").rows() == [[b"9"]]


def test_deallocate_and_discard_forget_prepared_statements(students: Any, wire: Callable[..., Any]) -> None:
    client = wire(students)
    client.parse(COUNT_BY_SEX, name="Counts")
    assert client.sync().kinds() == b"1Z"
    assert client.query('DEALLOCATE "Counts"').kinds() == b"CZ"
    assert client.query('DEALLOCATE "Counts"').errors()[0]["C"] == "26000"
    client.parse(COUNT_BY_SEX, name="Counts")  # the name is free again
    client.query("SET application_name = 'x'")
    reply = client.query("DISCARD ALL")
    assert reply.kinds().endswith(b"CZ") and b"application_name" in b"".join(b for _, b in reply.messages)
    client.bind((b"Male",), statement="Counts")
    assert client.sync().errors()[0]["C"] == "26000"


def test_function_call_is_refused_with_ready_for_query(students: Any, wire: Callable[..., Any]) -> None:
    client = wire(students)
    # FunctionCall: function OID, no argument formats, no arguments, text result
    client.raw(b"F" + struct.pack("!iihhh", 14, 1598, 0, 0, 0))
    reply = client.until_ready()  # the client is not left waiting
    assert reply.kinds() == b"EZ" and reply.status() == b"I"
    assert reply.errors()[0]["C"] == "0A000" and "function call" in reply.errors()[0]["M"]
    assert client.query("SELECT COUNT(*) FROM students").rows() == [[b"9"]]


def test_function_call_after_an_extended_error_waits_for_sync(
    students: Any, wire: Callable[..., Any]
) -> None:
    client = wire(students)
    client.bind(statement="no-such-statement")
    client.raw(b"F" + struct.pack("!iihhh", 14, 1598, 0, 0, 0))  # discarded with the rest
    reply = client.sync()
    assert reply.kinds() == b"EZ" and reply.errors()[0]["C"] == "26000"
    assert client.query("SELECT COUNT(*) FROM students").rows() == [[b"9"]]
