"""The server log: off the event loop, bounded, rate-limited, untrusted text escaped."""

from __future__ import annotations

import io
import logging
import queue
import threading
import time
from typing import Any

from guard.server.serverlog import RateLimitedQueueHandler, server_logging, untrusted


def test_untrusted_text_is_escaped_and_cut() -> None:
    assert untrusted("alice") == "'alice'"
    assert untrusted("a\nFAKE LOG LINE\x1b[31m") == repr("a\nFAKE LOG LINE\x1b[31m")
    cut = untrusted("u" * 10_000)
    assert cut == repr("u" * 200) + "... (10000 characters)"
    assert "\n" not in untrusted("x\n" * 500)


def _records(target: queue.Queue[Any]) -> list[str]:
    out = []
    while not target.empty():
        out.append(target.get_nowait().getMessage())
    return out


def test_each_kind_of_message_is_rate_limited_with_a_summary_line() -> None:
    now = [0.0]
    target: queue.Queue[Any] = queue.Queue()
    handler = RateLimitedQueueHandler(target, per_second=3, clock=lambda: now[0])
    logger = logging.getLogger("test.serverlog.rate")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        for n in range(10):
            logger.warning("login failed for user %s", n)
        logger.warning("another kind")
        assert _records(target) == [
            "login failed for user 0",
            "login failed for user 1",
            "login failed for user 2",
            "another kind",
        ]
        now[0] = 1.5
        logger.warning("login failed for user %s", "late")
        assert _records(target) == [
            "suppressed 7 similar messages ('login failed for user %s')",
            "login failed for user late",
        ]
        for n in range(5):
            logger.warning("login failed for user %s", n)
        handler.flush_summaries()  # logging stops: what was held back is still told
        assert _records(target)[-1] == "suppressed 3 similar messages ('login failed for user %s')"
    finally:
        logger.removeHandler(handler)


def test_a_full_queue_drops_records_instead_of_waiting() -> None:
    target: queue.Queue[Any] = queue.Queue(2)
    handler = RateLimitedQueueHandler(target, per_second=100)
    logger = logging.getLogger("test.serverlog.full")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        started = time.monotonic()
        for n in range(10):
            logger.warning("message %d", n)
        assert time.monotonic() - started < 0.5
        assert target.qsize() == 2 and handler.dropped == 8
    finally:
        logger.removeHandler(handler)


class StalledStream(io.StringIO):
    """A stream whose writes block until released: stderr on a pipe nobody drains."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.blocked = threading.Event()

    def write(self, text: str) -> int:
        self.blocked.set()
        self.release.wait(30)
        return super().write(text)


def test_a_stalled_stream_never_blocks_the_logging_caller() -> None:
    stream = StalledStream()
    logger = logging.getLogger("guard.server.test")
    with server_logging(stream, capacity=10) as handler:
        started = time.monotonic()
        for n in range(500):
            logger.warning("login failed for user %s from %s", untrusted("u" * 10_000), f"10.0.0.{n % 250}")
            logger.warning("distinct kind %d" + " " * (n % 7), n)
        assert time.monotonic() - started < 2
        assert stream.blocked.wait(5)  # the writer thread is the one stuck
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 3  # stopping does not wait for the stalled stream
    assert handler.dropped > 0
    stream.release.set()


def test_records_reach_the_stream_formatted_and_the_root_is_restored() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    before = root.handlers[:]
    with server_logging(stream):
        logging.getLogger("guard.server.pgwire.startup").warning(
            "login failed for user %s from %s", untrusted("eve\nINFO forged"), "10.0.0.1"
        )
    assert root.handlers == before
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 and "WARNING guard.server.pgwire.startup" in lines[0]
    assert "'eve\\nINFO forged'" in lines[0]
