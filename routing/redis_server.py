"""A throwaway ``redis-server`` on a free port, which a caller may kill and restart at will.

Outage runs (the chaos load, the store-outage tests) need a server of their own: killing a
shared one would break everyone else. The server keeps nothing on disk (``--save ''
--appendonly no``), so a restart comes back empty, as a real Redis without persistence does.
Everything listens on 127.0.0.1.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from routing.loadgen import free_port

START_TIMEOUT_SECONDS = 10.0


def redis_server_binary() -> str | None:
    """The ``redis-server`` executable on the PATH, or None."""
    return shutil.which("redis-server")


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` process on a fixed port; ``kill`` and ``start`` keep the port."""

    def __init__(self, binary: str, directory: Path) -> None:
        self.binary, self.directory = binary, directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = [
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(self.directory),
        ]  # fmt: skip
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.process = process
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not _answers(self.port):
            if process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL: the server vanishes without closing its connections politely."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()  # SIGKILL ends a stopped (SIGSTOP) process too
            self.process.wait(timeout=10)
        self.process = None

    def restart(self) -> None:
        self.kill()
        self.start()

    def pause(self) -> None:
        """SIGSTOP: the server hangs (connections stay open, nothing answers)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)


@contextmanager
def running_redis(binary: str) -> Iterator[RedisServer]:
    """A started server in a temporary directory; killed and removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="omniroute-redis-") as directory:
        server = RedisServer(binary, Path(directory))
        try:
            server.start()
            yield server
        finally:
            server.kill()
