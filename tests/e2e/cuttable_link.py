"""A TCP forwarder on 127.0.0.1 that a test can cut and restore: the network between a gateway
and a service on another host (PostgreSQL), without touching the service itself.

``cut`` closes the listener and every connection through it, so the gateway's pooled
connections break and new ones are refused; ``restore`` listens again on the same port.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any

from omniroute.tools.loadgen import free_port

CHUNK_BYTES = 65_536
STEP_TIMEOUT_SECONDS = 10


class CuttableLink:
    """Connections to ``127.0.0.1:port`` are passed on to ``target_host:target_port``."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def _call(self, work: Any) -> None:
        future: Future[None] = asyncio.run_coroutine_threadsafe(work, self._loop)
        future.result(timeout=STEP_TIMEOUT_SECONDS)

    def start(self) -> None:
        self._thread.start()
        self.restore()

    def restore(self) -> None:
        self._call(self._listen())

    def cut(self) -> None:
        self._call(self._cut())

    def stop(self) -> None:
        self.cut()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=STEP_TIMEOUT_SECONDS)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._pass_on, "127.0.0.1", self.port)

    async def _cut(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _pass_on(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            target_reader, target_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, target_writer}
        await asyncio.gather(
            _pipe(reader, target_writer), _pipe(target_reader, writer), return_exceptions=True
        )
        self._writers -= {writer, target_writer}


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(CHUNK_BYTES):
            writer.write(chunk)
            await writer.drain()
    finally:
        with contextlib.suppress(Exception):
            writer.transport.abort()


@contextmanager
def cuttable_link(target_host: str, target_port: int) -> Iterator[CuttableLink]:
    link = CuttableLink(target_host, target_port)
    link.start()
    try:
        yield link
    finally:
        link.stop()
