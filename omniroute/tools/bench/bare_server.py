"""How the bench serves its bare proxy (``omniroute.tools.bench.bare``): the gateway's server
entry (``python -m omniroute.server``, as ``manage.py serve`` runs it, with its flags) on the
ASGI application of that module, which forwards to the upstream named in its environment. One
process binds its port itself; several accept on one socket they inherit, as the workers of
``serve --workers N`` do."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from omniroute.core.codepath import child_environ, python_module
from omniroute.tools.loadgen import spawned, stop, wait_for_port

UPSTREAM_VARIABLE = "OMNIROUTE_BARE_PROXY_UPSTREAM"
EPOLL_WAITS = frozenset({"do_epoll_wait", "ep_poll"})  # /proc/<pid>/wchan of an idle event loop
APPLICATION = "omniroute.tools.bench.bare:application"


def bare_proxy_argv(port: int) -> list[str]:
    """The bare proxy on 127.0.0.1:``port``, with ``manage.py serve``'s daphne flags."""
    return _argv(["-b", "127.0.0.1", "-p", str(port)])


def inherited_socket_argv(fd: int) -> list[str]:
    """The bare proxy accepting on the listening socket ``fd`` it inherits."""
    return _argv(["--fd", str(fd)])


def _argv(where: list[str]) -> list[str]:
    """As ``serve`` starts its servers: this interpreter, this checkout's code, whatever the
    working directory (``omniroute.core.codepath``)."""
    server = [*where, "--proxy-headers", "-v", "0"]
    return [*python_module("omniroute.server"), *server, APPLICATION]


@contextmanager
def bare_proxy(
    env: dict[str, str], port: int, upstream: str, *, log: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """The bare proxy forwarding to ``upstream`` (a base URL), listening once this yields;
    stopped on exit."""
    environ = child_environ({**env, UPSTREAM_VARIABLE: upstream})
    with spawned(bare_proxy_argv(port), environ, port, log=log) as p:
        yield p


@contextmanager
def bare_proxies(
    env: dict[str, str], port: int, upstream: str, count: int
) -> Iterator[tuple[int, ...]]:
    """``count`` bare proxy processes accepting on one socket bound to 127.0.0.1:``port``,
    forwarding to ``upstream``; their process ids once the port answers. All stopped on exit."""
    with ExitStack() as stack:
        listener = stack.enter_context(socket.create_server(("127.0.0.1", port), backlog=1024))
        listener.set_inheritable(True)
        fd, environ = listener.fileno(), child_environ({**env, UPSTREAM_VARIABLE: upstream})
        processes = []
        for _ in range(count):
            process = subprocess.Popen(
                inherited_socket_argv(fd),
                env=environ,
                pass_fds=(fd,),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            stack.callback(stop, process)
            processes.append(process)
        wait_for_port(port)  # the socket listens from the bind: wait for the processes too
        pids = tuple(process.pid for process in processes)
        wait_until_serving(pids)
        yield pids


def wait_until_serving(pids: tuple[int, ...], timeout: float = 30.0) -> None:
    """Wait until every process of ``pids`` waits in its event loop (its kernel wait channel is
    the epoll wait), twice in a row: each has started and accepts, so the load's connections
    reach all of them. A kernel that hides wait channels has this wait the whole ``timeout``."""
    deadline, idle_before = time.monotonic() + timeout, False
    while time.monotonic() < deadline:
        idle = all(_wait_channel(pid) in EPOLL_WAITS for pid in pids)
        if idle and idle_before:
            return
        idle_before = idle
        time.sleep(0.2)


def _wait_channel(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/wchan").read_text().strip()
    except OSError:
        return ""
