"""A throwaway ``redis-server`` on a free port, which a caller may kill and restart at will.

Outage runs (the chaos load, the store-outage tests) need a server of their own: killing a
shared one would break everyone else. The server keeps nothing on disk (``--save ''
--appendonly no``), so a restart comes back empty, as a real Redis without persistence does.
Everything listens on 127.0.0.1. ``tls_redis`` starts one that speaks only TLS and wants a
password, as a managed Redis across hosts does (``rediss://``, docs/deploying.md).
"""

from __future__ import annotations

import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from omniroute.tools.loadgen import free_port

START_TIMEOUT_SECONDS = 10.0


def redis_server_binary() -> str | None:
    """The ``redis-server`` executable on the PATH, or None."""
    return shutil.which("redis-server")


@dataclass(frozen=True, slots=True)
class Tls:
    """A TLS-only server's files (a throwaway authority and its certificate for 127.0.0.1) and
    its password."""

    ca: Path
    certificate: Path
    key: Path
    password: str


def _answers(port: int, tls: Tls | None = None) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as plain:
            if tls is None:
                plain.sendall(b"PING\r\n")
                return plain.recv(16).startswith(b"+PONG")
            context = ssl.create_default_context(cafile=str(tls.ca))
            with context.wrap_socket(plain, server_hostname="127.0.0.1") as sock:
                sock.sendall(f"AUTH {tls.password}\r\nPING\r\n".encode())
                return b"+PONG" in sock.recv(32)
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` process on a fixed port; ``kill`` and ``start`` keep the port."""

    def __init__(self, binary: str, directory: Path, tls: Tls | None = None) -> None:
        self.binary, self.directory, self.tls = binary, directory, tls
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        if self.tls is None:
            return f"redis://127.0.0.1:{self.port}/0"
        password, ca = quote(self.tls.password, safe=""), quote(str(self.tls.ca))
        return f"rediss://:{password}@127.0.0.1:{self.port}/0?ssl_ca_certs={ca}"

    def _listen_arguments(self) -> list[str]:
        if self.tls is None:
            return ["--port", str(self.port)]
        tls = self.tls
        return [
            *("--port", "0", "--tls-port", str(self.port)),
            *("--tls-cert-file", str(tls.certificate), "--tls-key-file", str(tls.key)),
            *("--tls-ca-cert-file", str(tls.ca), "--tls-auth-clients", "no"),
            *("--requirepass", tls.password),
        ]

    def start(self) -> None:
        argv = [
            self.binary,
            *self._listen_arguments(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.directory),
        ]
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.process = process
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not _answers(self.port, self.tls):
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


def _openssl(*arguments: str) -> None:
    subprocess.run(["openssl", *arguments], check=True, capture_output=True, timeout=60)


def make_tls(directory: Path, password: str) -> Tls:
    """A throwaway certificate authority and a certificate for 127.0.0.1 signed by it (the
    ``openssl`` command line), in ``directory``."""
    tls = Tls(directory / "ca.pem", directory / "server.pem", directory / "server.key", password)
    ca_key, request = directory / "ca.key", directory / "server.csr"
    _openssl(
        *("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"),
        *("-keyout", str(ca_key), "-out", str(tls.ca), "-subj", "/CN=omniroute test authority"),
    )
    _openssl(
        *("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(tls.key)),
        *("-out", str(request), "-subj", "/CN=127.0.0.1"),
    )
    names = directory / "names.ext"
    names.write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl(
        *("x509", "-req", "-in", str(request), "-CA", str(tls.ca), "-CAkey", str(ca_key)),
        *("-CAcreateserial", "-days", "2", "-out", str(tls.certificate)),
        *("-extfile", str(names)),
    )
    return tls


@contextmanager
def tls_redis(binary: str, password: str) -> Iterator[RedisServer]:
    """A started TLS-only server that wants ``password``; killed and removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="omniroute-redis-tls-") as directory:
        server = RedisServer(binary, Path(directory), make_tls(Path(directory), password))
        try:
            server.start()
            yield server
        finally:
            server.kill()
