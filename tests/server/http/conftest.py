"""A real uvicorn server on 127.0.0.1 (a free port) over a guard on a fresh state folder."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from guard import Guard
from guard.server.http import create_app
from guard.server.listen import bind

ROOT = Path(__file__).resolve().parents[3]
POLICIES = ROOT / "policies"
ALICE = {"Authorization": "Bearer alice-demo"}
BOB = {"Authorization": "Bearer bob-demo"}


@dataclass
class Api:
    guard: Guard
    url: str
    client: httpx.Client


@contextmanager
def live(app: FastAPI) -> Iterator[str]:
    """Serve ``app`` on a free loopback port in a background thread; yields its URL."""
    sock = bind("127.0.0.1", 0, "HTTP", "--http-port")
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextmanager
def api(policy: str, state: Path) -> Iterator[Api]:
    with (
        Guard.open(POLICIES / policy, state=state) as guard,
        live(create_app(guard)) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        yield Api(guard, url, client)


@pytest.fixture
def students_api(tmp_path: Path) -> Iterator[Api]:
    with api("students.yaml", tmp_path / "state") as running:
        yield running


@pytest.fixture(scope="module")
def shared_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """One students server for the tests that do not depend on what was asked before."""
    with api("students.yaml", tmp_path_factory.mktemp("shared")) as running:
        yield running


@pytest.fixture
def dp_api(tmp_path: Path) -> Iterator[Api]:
    with api("hospital-dp.yaml", tmp_path / "state") as running:
        yield running
