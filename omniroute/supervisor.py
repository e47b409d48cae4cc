"""``manage.py serve --workers N``: one listening socket, N worker processes accepting on it.

The supervisor binds the socket once, then starts N workers (each a daphne or uvicorn process
of its own, see ``routing/management/commands/serve.py``) that inherit its file descriptor; the
kernel hands each new connection to one of the workers accepting. The supervisor itself serves
nothing. It

- restarts a worker that exits, whatever its exit status, and logs it; a worker that lived less
  than ``RESTART_PAUSE_SECONDS`` is replaced only once that long has passed since it started, so
  one that cannot start does not spin;
- on SIGTERM or SIGINT sends SIGTERM to every worker once, waits up to its grace period for them
  to finish their open requests and exit, SIGKILLs any still running, and returns;
- gives the workers a fresh ``PROMETHEUS_MULTIPROC_DIR`` (:func:`metrics_directory`), so
  ``/metrics`` on any worker adds up all of them (omniroute/metrics.py).

Workers run in a process group of their own: a terminal's Ctrl-C reaches the supervisor alone,
which stops them with the one SIGTERM (a second signal would cut uvicorn's drain short). On
Linux a worker also gets SIGTERM when the supervisor dies without stopping it (SIGKILL).
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from prometheus_client import multiprocess

from omniroute.metrics import MULTIPROC_DIR_VARIABLE

__all__ = ["Supervisor", "listening_socket", "metrics_directory"]

logger = logging.getLogger("omniroute.server")

RESTART_PAUSE_SECONDS = 1.0
POLL_SECONDS = 0.1
PR_SET_PDEATHSIG = 1  # prctl(2)


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening (IPv6 when the host is)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host.strip("[]"), port), family=family, backlog=1024)


@contextmanager
def metrics_directory(environ: Mapping[str, str]) -> Iterator[str]:
    """An empty directory for the workers' metric files: the operator's
    ``PROMETHEUS_MULTIPROC_DIR`` emptied, or a new temporary one removed afterwards."""
    given = environ.get(MULTIPROC_DIR_VARIABLE)
    if given:
        directory = Path(given)
        directory.mkdir(parents=True, exist_ok=True)
        for entry in directory.iterdir():
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        yield given
        return
    created = tempfile.mkdtemp(prefix="omniroute-metrics-")
    try:
        yield created
    finally:
        shutil.rmtree(created, ignore_errors=True)


def stop_with_parent() -> None:
    """In a worker, before it runs: have the kernel send it SIGTERM when the supervisor dies
    (Linux), so a supervisor killed outright leaves no workers behind."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def reap_orphans(workers: set[int]) -> None:
    """Reap the exited children that are no worker, never a worker (its ``Popen`` reaps it
    and reads its status). As a container's PID 1 the supervisor inherits every process a
    worker leaves behind: a worker's request-log writer process outlives it by a moment
    (docs/operating.md, "Request log"), and would stay a zombie."""
    while True:
        try:
            waitable = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return  # no child at all
        if waitable is None or waitable.si_pid in workers:
            return  # a worker first: the next round, once it is replaced
        os.waitpid(waitable.si_pid, 0)


@dataclass
class Worker:
    """One running worker process and when it started (monotonic seconds)."""

    process: subprocess.Popen[bytes]
    started: float


@dataclass
class Supervisor:
    """Keeps ``count`` workers running on ``listener`` until a stop signal, then stops them.

    ``command`` is a worker's argv given the listening socket it inherits."""

    command: Callable[[socket.socket], list[str]]
    count: int
    listener: socket.socket
    env: dict[str, str]
    grace_seconds: float
    workers: list[Worker] = field(default_factory=list)
    stop_signal: int | None = None

    def run(self) -> None:
        """Serve until SIGTERM or SIGINT, then stop the workers."""
        for stop in (signal.SIGTERM, signal.SIGINT):
            signal.signal(stop, self._on_stop)
        self.workers = [self._start() for _ in range(self.count)]
        logger.info("supervising %d workers: %s", self.count, self._pids())
        while self.stop_signal is None:
            self._replace_exited()
            reap_orphans({worker.process.pid for worker in self.workers})
            time.sleep(POLL_SECONDS)
        self._stop()

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stop_signal = signum

    def _start(self) -> Worker:
        fd = self.listener.fileno()
        argv = self.command(self.listener)
        process = subprocess.Popen(
            argv, env=self.env, pass_fds=(fd,), process_group=0, preexec_fn=stop_with_parent
        )
        return Worker(process, time.monotonic())

    def _replace_exited(self) -> None:
        for index, worker in enumerate(self.workers):
            code = worker.process.poll()
            if code is None or time.monotonic() - worker.started < RESTART_PAUSE_SECONDS:
                continue
            pid = worker.process.pid
            multiprocess.mark_process_dead(pid, self.env[MULTIPROC_DIR_VARIABLE])
            self.workers[index] = self._start()
            new_pid = self.workers[index].process.pid
            logger.warning("worker %d exited with status %d; started worker %d", pid, code, new_pid)

    def _stop(self) -> None:
        logger.info("stopping %d workers (signal %d)", len(self.workers), self.stop_signal or 0)
        self.listener.close()
        for worker in self.workers:
            if worker.process.poll() is None:
                worker.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.grace_seconds
        for worker in self.workers:
            try:
                worker.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                logger.warning(
                    "worker %d still running after %g s: killed",
                    worker.process.pid,
                    self.grace_seconds,
                )
                worker.process.kill()
                worker.process.wait()

    def _pids(self) -> str:
        return ", ".join(str(worker.process.pid) for worker in self.workers)
