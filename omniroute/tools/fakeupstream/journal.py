"""Thread-safe shared state: the bounded request log, the script queue, the per-model
knobs, the answer counters and the client connections seen."""

from __future__ import annotations

import asyncio
import copy
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Final

from omniroute.tools.fakeupstream.behaviour import RequestRecord

LOG_SIZE: Final = 1000
_POLL_S: Final = 0.02


class Journal:
    """Written by the server loop, read by tests from other threads or loops."""

    def __init__(self, *, record: bool = True) -> None:
        self.recording = record
        self._lock = threading.Lock()
        self._changed = threading.Event()
        self._log: deque[RequestRecord] = deque(maxlen=LOG_SIZE)
        self._script: deque[dict[str, Any]] = deque()
        self._models: dict[str, dict[str, Any]] = {}
        self._stats = {"chat": 0, "failed": 0}
        self._peers: set[object] = set()

    def add(self, rec: RequestRecord) -> None:
        if self.recording:
            with self._lock:
                self._log.append(rec)
            self._changed.set()

    def touch(self) -> None:
        """Wake waiters: a record changed."""
        self._changed.set()

    def snapshot(self) -> list[RequestRecord]:
        with self._lock:
            return [copy.copy(r) for r in self._log]

    def reset(self) -> None:
        with self._lock:
            self._log.clear()
            self._script.clear()
            self._models.clear()
            self._stats = dict.fromkeys(self._stats, 0)
            self._peers.clear()

    def push_script(self, behaviours: Iterable[dict[str, Any]]) -> None:
        with self._lock:
            self._script.extend(behaviours)

    def pop_script(self) -> dict[str, Any]:
        with self._lock:
            return self._script.popleft() if self._script else {}

    def set_model(self, model: str, knobs: dict[str, Any]) -> None:
        """Apply ``knobs`` to every answer request for ``model``; empty knobs forget it."""
        with self._lock:
            if knobs:
                self._models[model] = dict(knobs)
            else:
                self._models.pop(model, None)

    def model_knobs(self, model: str) -> dict[str, Any]:
        with self._lock:
            return dict(self._models.get(model, {}))

    def count(self, *, failed: bool, peer: object = None) -> None:
        """Count one answer (chat, responses or messages: all under ``chat``) and the client
        connection (its ``peer`` address) that carried it (kept even when the log is off)."""
        with self._lock:
            self._stats["chat"] += 1
            self._stats["failed"] += failed
            if peer is not None:
                self._peers.add(peer)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {**self._stats, "connections": len(self._peers)}

    def wait_until(self, check: Callable[[], object], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            self._changed.clear()
            if check():
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._changed.wait(min(remaining, _POLL_S))

    async def wait_until_async(self, check: Callable[[], object], deadline: float) -> bool:
        while not check():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(_POLL_S / 4)
        return True
