""":class:`FakeUpstream`: the library API, serving in a thread or in the current loop."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Final
from urllib.parse import urlencode

from aiohttp import web

from omniroute.tools.fakeupstream.app import FakeApp
from omniroute.tools.fakeupstream.behaviour import Behaviour, RequestRecord, checked_knobs
from omniroute.tools.fakeupstream.journal import Journal

SHUTDOWN_TIMEOUT_S: Final = 0.25
_START_TIMEOUT_S: Final = 10.0
_STOP_TIMEOUT_S: Final = 5.0

Predicate = Callable[["FakeUpstream"], object]


class FakeUpstream:
    """A fake OpenAI (and Anthropic) server; see the package docstring for endpoints and knobs."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        defaults: Behaviour | None = None,
        record: bool = True,
        seed: int | None = None,
    ) -> None:
        self._host, self._port = host, port
        self._journal = Journal(record=record)
        self._app = FakeApp(defaults or Behaviour(), self._journal, seed)
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self._port}"

    def base_url(self, **knobs: object) -> str:
        """The OpenAI base URL; with knobs, a scenario path applying them."""
        return f"{self.url}/s/{urlencode(knobs)}/v1" if knobs else f"{self.url}/v1"

    def anthropic_base_url(self, **knobs: object) -> str:
        """The Anthropic base URL (the SDK appends ``/v1/messages``); with knobs, a scenario
        path applying them."""
        return f"{self.url}/s/{urlencode(knobs)}" if knobs else self.url

    def script(self, *behaviours: Mapping[str, object]) -> None:
        """Queue knob sets for the next answer requests, any route (FIFO, each used once)."""
        self._journal.push_script([checked_knobs(b) for b in behaviours])

    def set_model(self, model: str, **knobs: object) -> None:
        """Apply ``knobs`` to every following answer request for ``model`` (the name before
        ``?``) until changed; no knobs: forget the model's knobs."""
        self._journal.set_model(model, checked_knobs(knobs))

    @property
    def stats(self) -> dict[str, int]:
        """Answers so far on the chat, responses and messages routes: ``chat`` in all,
        ``failed`` of them not a plain success, and ``connections``: how many distinct client
        connections carried them."""
        return self._journal.stats()

    @property
    def requests(self) -> list[RequestRecord]:
        """A snapshot (shallow copies) of the recorded requests, oldest first."""
        return self._journal.snapshot()

    def reset(self) -> None:
        """Forget recorded requests, scripted behaviours, per-model knobs and the counters."""
        self._journal.reset()

    def wait_for(self, predicate: Predicate, timeout: float = 5.0) -> bool:
        """Block until ``predicate(self)`` is truthy; False on timeout.

        Do not call it from the event loop that runs the client under test (the client's
        socket may only close once that loop runs): use :meth:`wait_for_async` there.
        """
        return self._journal.wait_until(lambda: predicate(self), timeout)

    async def wait_for_async(self, predicate: Predicate, timeout: float = 5.0) -> bool:  # noqa: ASYNC109
        """Like :meth:`wait_for`, polling without blocking the running loop."""
        deadline = time.monotonic() + timeout
        return await self._journal.wait_until_async(lambda: predicate(self), deadline)

    async def listen(self) -> str:
        """Start serving in the running loop; returns :attr:`url`."""
        runner = web.AppRunner(
            self._app.build(),
            handler_cancellation=True,
            access_log=None,
            shutdown_timeout=SHUTDOWN_TIMEOUT_S,
        )
        await runner.setup()
        await web.TCPSite(runner, self._host, self._port).start()
        self._port = runner.addresses[0][1]
        self._runner = runner
        return self.url

    async def serve_forever(self) -> None:
        """Serve in the current loop until cancelled."""
        if self._runner is None:
            await self.listen()
        try:
            await asyncio.get_running_loop().create_future()
        finally:
            await self._close()

    def start(self) -> FakeUpstream:
        """Serve from a daemon thread with its own loop; returns once listening."""
        if self._thread is not None:
            raise RuntimeError("fake upstream already started")
        self._loop = loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name="fakeupstream", daemon=True)
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.listen(), loop).result(_START_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the thread started by :meth:`start`; bounded, never hangs."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._close(), loop).result(_STOP_TIMEOUT_S)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(_STOP_TIMEOUT_S)
        if not thread.is_alive():
            loop.close()
        self._loop = self._thread = None

    def __enter__(self) -> FakeUpstream:
        return self if self._thread is not None else self.start()

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def _close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
