"""``guard serve`` as a subprocess on loopback, for harnesses that must also kill it.

:class:`Served` starts the server on free ports (``--pg-port 0 --http-port 0``), reads
its URLs from stdout, keeps its stderr in a file (tracebacks are findings too) and stops
it with SIGTERM (:meth:`Served.stop`) or SIGKILL (:meth:`Served.kill`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["ServeFailed", "Served", "pg_address"]

#: seconds the server may take to start or stop
STARTUP = STOP = 60.0


class ServeFailed(RuntimeError):
    """``guard serve`` exited or printed no URL within the start-up bound."""


class Served:
    """A running ``guard serve``; ``urls`` by endpoint (``http``, ``postgresql``)."""

    def __init__(self, policy: Path, state: Path, stderr: Path, *extra: str) -> None:
        command = [sys.executable, "-c", "from guard.cli.main import main; main()", "serve"]
        command += ["--policy", str(policy), "--state", str(state), "--host", "127.0.0.1"]
        command += ["--http-port", "0", "--pg-port", "0", *extra]
        self.stderr_path = stderr
        with stderr.open("ab") as err:
            self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True)
        self.urls: dict[str, str] = {}
        self._wait_for_urls()
        # nothing more is expected on stdout, but a pipe nobody reads must never block it
        threading.Thread(target=self._drain, daemon=True).start()

    def _wait_for_urls(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        deadline = time.monotonic() + STARTUP
        found: dict[str, str] = {}
        reader = threading.Thread(target=self._read_urls, args=(stdout, found), daemon=True)
        reader.start()
        reader.join(max(0.0, deadline - time.monotonic()))
        if reader.is_alive() or not found:
            self.kill()
            tail = self.stderr_path.read_text(errors="replace")[-2000:]
            raise ServeFailed(f"guard serve did not start (exit {self.process.returncode}): {tail}")
        self.urls = found

    @staticmethod
    def _read_urls(stdout: object, found: dict[str, str]) -> None:
        for line in stdout:  # type: ignore[attr-defined]
            if line.startswith("Ctrl-C"):
                return
            if match := re.match(r"\s+(HTTP|PostgreSQL)\s+(\S+)", line):
                found[match.group(1).lower()] = match.group(2)

    def _drain(self) -> None:
        stdout = self.process.stdout
        if stdout is not None:
            for _ in stdout:
                pass

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> int:
        """SIGTERM, then SIGKILL if it has not stopped within ``STOP`` seconds; the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(STOP)
            except subprocess.TimeoutExpired:
                pass
        return self.kill()

    def kill(self) -> int:
        """SIGKILL (a crash: no handler runs); the exit status."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        return self.process.wait(STOP)


def pg_address(url: str) -> dict[str, object]:
    """psycopg connection arguments (no user or password) of a ``postgresql://`` URL."""
    parts = urlsplit(url)
    return {"host": parts.hostname, "port": parts.port, "dbname": parts.path.lstrip("/")}
