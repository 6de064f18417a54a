"""PostgreSQL endpoint fixtures: servers on 127.0.0.1 port 0 over the example policies
(a fresh state folder per test module), and a raw protocol client for what drivers do
not expose (statement Describe, cancel keys, message order)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from guard import Guard
from guard.server.pgwire import PgServer, running_pg_server

ROOT = Path(__file__).resolve().parents[3]
POLICIES = ROOT / "policies"


@dataclass
class Endpoint:
    guard: Any  # a Guard, or a test double wrapping one
    server: PgServer

    @property
    def port(self) -> int:
        return self.server.port

    def dsn(
        self, user: str = "alice", password: str = "alice-demo", dbname: str = "statguard", **extra: str
    ) -> str:
        options = {
            "host": "127.0.0.1",
            "port": self.port,
            "user": user,
            "password": password,
            "dbname": dbname,
        }
        return " ".join(f"{k}={v}" for k, v in {**options, **extra}.items())

    def log_size(self) -> int:
        return len(self.guard.log())


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Endpoint]]:
    """serve(policy, wrap=None, **server_options) -> a running Endpoint, closed with the
    module. ``policy``: a name in policies/ or a path; ``wrap(guard)`` puts a test double
    in front of the guard."""
    stack: list[Any] = []

    def start(policy: str | Path, wrap: Callable[[Guard], Any] | None = None, **options: Any) -> Endpoint:
        path = policy if isinstance(policy, Path) else POLICIES / f"{policy}.yaml"
        state = tmp_path_factory.mktemp(f"state-{path.stem}")
        guard = Guard.open(path, state=state)
        stack.append(guard)
        served = wrap(guard) if wrap else guard
        context = running_pg_server(served, host="127.0.0.1", port=0, **options)
        server = context.__enter__()
        stack.append(context)
        return Endpoint(served, server)

    yield start
    for item in reversed(stack):
        if isinstance(item, Guard):
            item.close()
        else:
            item.__exit__(None, None, None)


@pytest.fixture(scope="module")
def students(serve: Callable[..., Endpoint]) -> Endpoint:
    return serve("students")


class Gate:
    """A guard whose queries wait at the gate until it opens."""

    def __init__(self, guard: Any) -> None:
        self._guard = guard
        self.entered = threading.Event()
        self.opened = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._guard, name)

    def query(self, *args: Any, **kwargs: Any) -> Any:
        self.entered.set()
        assert self.opened.wait(10)
        return self._guard.query(*args, **kwargs)


@pytest.fixture
def gated(serve: Callable[..., Endpoint]) -> Endpoint:
    """The students policy behind a :class:`Gate`, with one worker thread."""
    return serve("students", wrap=Gate, workers=1)


# --- a raw protocol v3 client --------------------------------------------------------


@dataclass
class Reply:
    """The backend messages answering one request, up to ReadyForQuery."""

    messages: list[tuple[bytes, bytes]] = field(default_factory=list)

    def kinds(self) -> bytes:
        return b"".join(kind for kind, _ in self.messages)

    def errors(self) -> list[dict[str, str]]:
        return [_fields(body) for kind, body in self.messages if kind == b"E"]

    def notices(self) -> list[dict[str, str]]:
        return [_fields(body) for kind, body in self.messages if kind == b"N"]

    def columns(self) -> list[tuple[str, int, int]]:
        """(name, type OID, format) of the first RowDescription."""
        body = next(body for kind, body in self.messages if kind == b"T")
        (count,) = struct.unpack_from("!h", body)
        at, out = 2, []
        for _ in range(count):
            end = body.index(b"\x00", at)
            name = body[at:end].decode()
            _, _, oid, _, _, fmt = struct.unpack_from("!ihihih", body, end + 1)
            out.append((name, oid, fmt))
            at = end + 1 + 18
        return out

    def rows(self) -> list[list[bytes | None]]:
        out = []
        for kind, body in self.messages:
            if kind != b"D":
                continue
            (count,) = struct.unpack_from("!h", body)
            at, row = 2, []
            for _ in range(count):
                (size,) = struct.unpack_from("!i", body, at)
                at += 4
                row.append(None if size == -1 else body[at : at + size])
                at += max(size, 0)
            out.append(row)
        return out

    def parameter_types(self) -> list[int]:
        body = next(body for kind, body in self.messages if kind == b"t")
        (count,) = struct.unpack_from("!h", body)
        return list(struct.unpack_from(f"!{count}I", body, 2))

    def status(self) -> bytes:
        return self.messages[-1][1]


def _fields(body: bytes) -> dict[str, str]:
    out, at = {}, 0
    while body[at : at + 1] != b"\x00":
        end = body.index(b"\x00", at + 1)
        out[chr(body[at])] = body[at + 1 : end].decode()
        at = end + 1
    return out


def _message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def _cstring(text: str) -> bytes:
    return text.encode() + b"\x00"


class WireClient:
    """Speaks protocol v3 over a socket, one message at a time."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.process_id = 0
        self.secret_key = 0
        self.parameters: dict[str, str] = {}

    def raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_exactly(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("server closed the connection")
            data += chunk
        return data

    def read(self) -> tuple[bytes, bytes]:
        kind = self.read_exactly(1)
        (length,) = struct.unpack("!i", self.read_exactly(4))
        return kind, self.read_exactly(length - 4)

    def startup(
        self, user: str = "alice", password: str = "alice-demo", database: str = "statguard"
    ) -> Reply:
        body = struct.pack("!i", 3 << 16) + _cstring("user") + _cstring(user)
        body += _cstring("database") + _cstring(database) + b"\x00"
        self.raw(struct.pack("!i", len(body) + 4) + body)
        kind, auth = self.read()
        if kind == b"E":
            return Reply([(kind, auth)])
        assert kind == b"R" and struct.unpack_from("!i", auth)[0] == 10, (kind, auth)
        nonce = base64.b64encode(os.urandom(18)).decode()
        first_bare = f"n=,r={nonce}"
        initial = ("n,," + first_bare).encode()
        self.raw(_message(b"p", _cstring("SCRAM-SHA-256") + struct.pack("!i", len(initial)) + initial))
        kind, body = self.read()
        if kind == b"E":
            return Reply([(kind, body)])
        server_first = body[4:].decode()
        attributes = dict(part.split("=", 1) for part in server_first.split(","))
        salted = hashlib.pbkdf2_hmac(
            "sha256", password.encode(), base64.b64decode(attributes["s"]), int(attributes["i"])
        )
        client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
        stored_key = hashlib.sha256(client_key).digest()
        without_proof = f"c=biws,r={attributes['r']}"
        auth_message = f"{first_bare},{server_first},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, hashlib.sha256).digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
        self.raw(_message(b"p", f"{without_proof},p={proof}".encode()))
        reply = Reply()
        while True:
            kind, body = self.read()
            reply.messages.append((kind, body))
            if kind == b"K":
                self.process_id, self.secret_key = struct.unpack("!ii", body)
            if kind == b"S":
                name, value, _ = body.split(b"\x00")
                self.parameters[name.decode()] = value.decode()
            if kind in (b"Z", b"E"):
                return reply

    def until_ready(self) -> Reply:
        reply = Reply()
        while True:
            kind, body = self.read()
            reply.messages.append((kind, body))
            if kind == b"Z":
                return reply

    def query(self, sql: str) -> Reply:
        self.raw(_message(b"Q", _cstring(sql)))
        return self.until_ready()

    def parse(self, sql: str, name: str = "", types: tuple[int, ...] = ()) -> None:
        body = _cstring(name) + _cstring(sql) + struct.pack(f"!h{len(types)}I", len(types), *types)
        self.raw(_message(b"P", body))

    def bind(
        self,
        values: tuple[bytes | None, ...] = (),
        *,
        portal: str = "",
        statement: str = "",
        formats: tuple[int, ...] = (),
        results: tuple[int, ...] = (),
    ) -> None:
        body = (
            _cstring(portal) + _cstring(statement) + struct.pack(f"!h{len(formats)}h", len(formats), *formats)
        )
        body += struct.pack("!h", len(values))
        for value in values:
            body += struct.pack("!i", -1) if value is None else struct.pack("!i", len(value)) + value
        body += struct.pack(f"!h{len(results)}h", len(results), *results)
        self.raw(_message(b"B", body))

    def describe(self, kind: bytes, name: str = "") -> None:
        self.raw(_message(b"D", kind + _cstring(name)))

    def execute(self, portal: str = "", max_rows: int = 0) -> None:
        self.raw(_message(b"E", _cstring(portal) + struct.pack("!i", max_rows)))

    def sync(self) -> Reply:
        self.raw(_message(b"S"))
        return self.until_ready()

    def close(self) -> None:
        try:
            self.raw(_message(b"X"))
        finally:
            self.sock.close()


@pytest.fixture
def wire() -> Iterator[Callable[[Endpoint], WireClient]]:
    """wire(endpoint) -> a WireClient logged in as alice (``login=False``: just connected)."""
    clients: list[WireClient] = []

    def connect(
        endpoint: Endpoint, user: str = "alice", password: str = "alice-demo", *, login: bool = True
    ) -> WireClient:
        client = WireClient(endpoint.port)
        clients.append(client)
        if login:
            reply = client.startup(user, password)
            assert reply.status() == b"I", reply.errors()
        return client

    yield connect
    for client in clients:
        with contextlib.suppress(OSError):
            client.close()
