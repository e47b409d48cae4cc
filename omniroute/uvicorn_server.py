"""Process entry point for serving under uvicorn (``manage.py serve --server uvicorn``).

Run as ``python -m omniroute.uvicorn_server --host H --port P`` (or ``--fd N``, a listening
socket inherited from ``serve --workers``'s supervisor). The application is the same ASGI
application daphne serves, on uvloop with the httptools parser:

- client addresses come from X-Forwarded-For as under daphne's ``--proxy-headers`` (the first
  address, the port from X-Forwarded-Port), and the scheme is left alone whatever
  X-Forwarded-Proto says: Django's ``SECURE_PROXY_SSL_HEADER`` decides that
  (``OMNIROUTE_SECURE_PROXY_SSL_HEADER``, docs/deploying.md);
- a request body that stops arriving gets the 408 of ``omniroute.body_timeout`` (the body
  only: uvicorn bounds no request line or headers), and an idle keep-alive connection is closed
  after as long;
- uvicorn's ``send`` waits for the client's transport to drain before it writes a body part,
  so a streamed answer keeps its back-pressure (what ``omniroute.flowcontrol`` adds to daphne);
- on SIGTERM or SIGINT it stops accepting and sets the stop signal (``omniroute.core.stopping``:
  open streams end with the in-band ``server_shutting_down`` error), lets plain requests finish
  for ``SHUTDOWN_GRACE_SECONDS``, cancels what is left, then the lifespan's stop closes the
  upstream pools (``omniroute.lifespan``).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import socket
import sys
from collections.abc import Iterator
from typing import Any

import uvicorn

from omniroute.core import stopping

logger = logging.getLogger("omniroute.server")


class ForwardedClient:
    """The client's address from X-Forwarded-For, as daphne's ``--proxy-headers`` reads it;
    the scheme untouched."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            client = forwarded_client(scope["headers"])
            if client is not None:
                scope = {**scope, "client": client}
        await self.app(scope, receive, send)


def forwarded_client(headers: list[tuple[bytes, bytes]]) -> tuple[str, int] | None:
    """The first address of X-Forwarded-For and the X-Forwarded-Port (0 when absent or not a
    number); ``None`` without X-Forwarded-For."""
    values = {name.lower(): value for name, value in headers}
    forwarded = values.get(b"x-forwarded-for")
    if forwarded is None:
        return None
    host = forwarded.decode("latin-1").split(",")[0].strip()
    port = values.get(b"x-forwarded-port", b"")
    return host, int(port) if port.isdigit() else 0


class CleanlyStoppingServer(uvicorn.Server):
    """uvicorn's server that tells the application at once that it is stopping, and exits 0
    after a stop by SIGTERM or SIGINT, as daphne does.

    uvicorn sends the lifespan's ``shutdown`` only once the open requests are over; the stop
    signal is set as its shutdown begins (it closes the listening sockets before it first
    yields to the event loop, so no connection is accepted after the signal). uvicorn raises
    the stop signal again once it has shut down (the process then dies of it, status -15 or
    -2); this one forgets the signal, the shutdown being complete."""

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        stopping.shutting_down.set()
        await super().shutdown(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            try:
                yield
            finally:
                self._captured_signals.clear()


def main(argv: list[str]) -> None:
    """Serve the gateway's ASGI application under uvicorn until stopped."""
    options = parse(argv)
    from django.conf import settings

    from omniroute.asgi import application  # sets Django up
    from omniroute.body_timeout import BodyTimeout
    from omniroute.collector import tune_collector

    tune_collector(settings.GC_GEN0_THRESHOLD)
    body_timeout = settings.BODY_TIMEOUT_SECONDS
    config = uvicorn.Config(
        ForwardedClient(BodyTimeout(application, body_timeout)),
        host=options.host,
        port=options.port,
        loop="uvloop",
        http="httptools",
        ws="websockets-sansio",
        lifespan="on",
        proxy_headers=False,  # ForwardedClient does that part
        server_header=False,
        access_log=options.access_log,
        log_config=None,  # Django's LOGGING already configured the handlers
        timeout_graceful_shutdown=stopping.SHUTDOWN_GRACE_SECONDS,
        timeout_keep_alive=math.ceil(body_timeout),  # as under daphne: idle connections close
    )
    logging.getLogger("uvicorn.access").setLevel(logging.INFO if options.access_log else "WARNING")
    logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
    sockets = None if options.fd is None else [socket.socket(fileno=options.fd)]
    where = (options.host, options.port) if sockets is None else sockets[0].getsockname()[:2]
    logger.info("gateway serving under uvicorn on %s port %s", *where)
    CleanlyStoppingServer(config).run(sockets=sockets)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m omniroute.uvicorn_server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--fd", type=int, help="Serve on this inherited listening socket.")
    parser.add_argument("--access-log", action="store_true")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
