"""The server's own log (warnings to stderr), kept off the event loop.

Records go through a bounded queue (:class:`logging.handlers.QueueHandler`) to a thread
that writes them (:class:`logging.handlers.QueueListener`): a stderr that does not drain
(a pipe nobody reads, a stopped terminal) stalls that thread only, never the loop that
serves both endpoints. When the queue is full, records are dropped and counted.

Strings a client chose (user names, paths, error texts that quote a query) are logged
through :func:`untrusted`: at most 200 characters, repr-escaped, so no newline or terminal
escape gets through. Each kind of message (its logger and format string) is written at
most ``per_second`` times a second; the rest are counted, and one line says how many were
suppressed when that kind is next written, or when logging stops.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from logging.handlers import QueueHandler, QueueListener
from typing import IO, Any

__all__ = ["RateLimitedQueueHandler", "server_logging", "untrusted"]

#: characters of an untrusted string kept in a log line
UNTRUSTED_CHARS = 200
#: kinds of message tracked for rate limiting (a bound against ever-new format strings)
_KINDS = 1024
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def untrusted(text: object, limit: int = UNTRUSTED_CHARS) -> str:
    """``text`` as a log may show it: repr-escaped, cut to ``limit`` characters (the
    full length said when cut)."""
    value = text if isinstance(text, str) else str(text)
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value)} characters)"


class _Window:
    __slots__ = ("count", "start", "suppressed")

    def __init__(self, start: float) -> None:
        self.start = start
        self.count = 0
        self.suppressed = 0


class RateLimitedQueueHandler(QueueHandler):
    """Puts records on a bounded queue, never waiting: at most ``per_second`` records of
    one kind a second, then a summary line; a full queue drops records (:attr:`dropped`)."""

    def __init__(
        self, target: queue.Queue[Any], per_second: int = 5, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(target)
        self.per_second = per_second
        self._clock = clock
        self._windows: dict[tuple[str, str], _Window] = {}
        self._guard = threading.Lock()
        self.dropped = 0

    def emit(self, record: logging.LogRecord) -> None:
        kind = (record.name, str(record.msg))
        now = self._clock()
        with self._guard:
            window = self._windows.get(kind)
            if window is None:
                if len(self._windows) >= _KINDS:
                    self.flush_summaries()
                    self._windows.clear()
                window = self._windows[kind] = _Window(now)
            summary = None
            if now - window.start >= 1.0:
                summary = self._summary(kind, window)
                window.start, window.count, window.suppressed = now, 0, 0
            window.count += 1
            allowed = window.count <= self.per_second
            if not allowed:
                window.suppressed += 1
        if summary is not None:
            super().emit(summary)
        if allowed:
            super().emit(record)

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1

    def flush_summaries(self) -> None:
        """A summary line for every kind with suppressed records (logging stops)."""
        with self._guard:
            summaries = [self._summary(k, w) for k, w in self._windows.items()]
            for window in self._windows.values():
                window.suppressed = 0
        for summary in summaries:
            if summary is not None:
                super().emit(summary)

    @staticmethod
    def _summary(kind: tuple[str, str], window: _Window) -> logging.LogRecord | None:
        if not window.suppressed:
            return None
        return logging.LogRecord(
            kind[0],
            logging.WARNING,
            __file__,
            0,
            "suppressed %d similar messages (%s)",
            (window.suppressed, untrusted(kind[1], 80)),
            None,
        )


class _Listener(QueueListener):
    """A listener whose stop does not wait for ever on a stream that does not drain."""

    def stop_within(self, seconds: float) -> None:
        thread = getattr(self, "_thread", None)
        if thread is None:
            return
        with contextlib.suppress(queue.Full):
            self.enqueue_sentinel()
        thread.join(seconds)  # a daemon thread: one that is stuck ends with the process
        self._thread = None


@contextlib.contextmanager
def server_logging(
    stream: IO[str] | None = None, level: int = logging.WARNING, per_second: int = 5, capacity: int = 1000
) -> Iterator[RateLimitedQueueHandler]:
    """Route every logger (the root's handlers replaced for the duration) through a
    bounded, rate-limited queue to a thread writing ``stream`` (stderr by default)."""
    records: queue.Queue[Any] = queue.Queue(capacity)
    writer = logging.StreamHandler(stream if stream is not None else sys.stderr)
    writer.setFormatter(logging.Formatter(_FORMAT))
    handler = RateLimitedQueueHandler(records, per_second)
    listener = _Listener(records, writer, respect_handler_level=False)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    root.handlers = [handler]
    root.setLevel(level)
    listener.start()
    try:
        yield handler
    finally:
        handler.flush_summaries()
        root.handlers, _ = saved
        root.setLevel(saved[1])
        listener.stop_within(1.0)
