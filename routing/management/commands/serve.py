"""``manage.py serve``: run the gateway under daphne (default) or uvicorn, on uvloop.

It first collects the static files (admin, browsable API, API docs) into ``STATIC_ROOT``, where
WhiteNoise serves them whatever ``DEBUG`` says; ``--no-collectstatic`` skips that when a
deployment collected them at build time.

With one worker (the default) this process becomes the server. With ``--workers N`` above one
it becomes a supervisor (omniroute/supervisor.py) of N server processes on one listening
socket, and only when the state they must share is shared: breakers, cooldowns, leases and rate
limits in Redis (``REDIS_URL``), configuration in a database other than SQLite
(docs/deploying.md).
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from omniroute.core.codepath import child_environ, python_module

APPLICATION = "omniroute.asgi:application"
SERVERS = ("daphne", "uvicorn")
# A worker's own drain (decision: plain requests finish within 30 s of a stop, see
# docs/deploying.md), plus time to close its pools before the supervisor kills it.
WORKER_GRACE_SECONDS = 35.0


def worker_count(value: str) -> int:
    count = int(value)
    if count < 1:
        raise ValueError(value)
    return count


class Command(BaseCommand):
    help = "Serve the gateway (admin, API and /v1 proxy) with daphne or uvicorn."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--access-log", action="store_true", help="Log every request.")
        parser.add_argument(
            "--workers",
            type=worker_count,
            default=1,
            help="Server processes on one socket (above 1: needs REDIS_URL and a database "
            "other than SQLite).",
        )
        parser.add_argument("--server", choices=SERVERS, default="daphne")
        parser.add_argument(
            "--no-collectstatic",
            dest="collectstatic",
            action="store_false",
            help="Serve the static files already in STATIC_ROOT without collecting them first.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        workers: int = options["workers"]
        if workers > 1:
            refuse_unshared_state(workers)
            refuse_daphne_on_ipv6(options["server"], options["host"])
        if options["collectstatic"]:
            call_command("collectstatic", interactive=False, verbosity=0)
        # The servers (and their children) import this code, not the working directory's.
        os.environ.update(child_environ(os.environ))
        if workers == 1:
            # A fresh interpreter: daphne's event loop policy must be set before its reactor.
            where = bound(options["server"], options["host"], options["port"])
            os.execv(sys.executable, server_argv(options["server"], options["access_log"], where))
            return  # execv does not return, unless a test stands in for it
        supervise(options, workers)


def refuse_unshared_state(workers: int) -> None:
    """Raise a CommandError naming what several workers would each keep to themselves."""
    missing = []
    if not settings.REDIS_URL:
        missing.append("REDIS_URL (breakers, cooldowns, leases and rate limits live in Redis)")
    if settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        missing.append("a DATABASE_URL other than SQLite (one database all workers share)")
    if missing:
        raise CommandError(
            f"serve --workers {workers} needs state the workers share; set "
            + " and ".join(missing)
            + ", or serve with one worker (docs/deploying.md)."
        )


def refuse_daphne_on_ipv6(server: str, host: str) -> None:
    """Daphne adopts an inherited socket as IPv4 only: its workers cannot share an IPv6 one."""
    if server == "daphne" and ":" in host:
        raise CommandError(
            "serve --workers with daphne listens on IPv4 hosts only; use --server uvicorn "
            "for an IPv6 host."
        )


def server_argv(server: str, access_log: bool, where: list[str]) -> list[str]:
    """The command line of one server process listening ``where`` (:func:`bound`,
    :func:`inherited`)."""
    if server == "uvicorn":
        logs = ["--access-log"] if access_log else []
        return [*python_module("omniroute.uvicorn_server"), *where, *logs]
    logs = ["--access-log", "-"] if access_log else ["-v", "0"]
    return [*python_module("omniroute.server"), *where, "--proxy-headers", *logs, APPLICATION]


def bound(server: str, host: str, port: int) -> list[str]:
    """The server's arguments to bind ``host:port`` itself."""
    if server == "uvicorn":
        return ["--host", host, "--port", str(port)]
    return ["-b", host, "-p", str(port)]


def inherited(server: str, listener: socket.socket) -> list[str]:
    """The server's arguments to accept on the listening socket it inherits."""
    return ["--fd", str(listener.fileno())]


def supervise(options: dict[str, Any], workers: int) -> None:
    """Bind the socket, run ``workers`` servers on it until stopped, clean up."""
    from omniroute.metrics import MULTIPROC_DIR_VARIABLE
    from omniroute.supervisor import Supervisor, listening_socket, metrics_directory

    listener = listening_socket(options["host"], options["port"])
    with metrics_directory(os.environ) as directory:
        env = {**os.environ, MULTIPROC_DIR_VARIABLE: directory}
        Supervisor(
            command=lambda listener: server_argv(
                options["server"], options["access_log"], inherited(options["server"], listener)
            ),
            count=workers,
            listener=listener,
            env=env,
            grace_seconds=WORKER_GRACE_SECONDS,
        ).run()
