"""The dashboard's WebSocket: staff only; pushes a snapshot at once, after every event
(coalesced) and every ``REFRESH_SECONDS``, and relays every process's events as they come."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from omniroute.dashboard.events import GROUP
from omniroute.dashboard.snapshot import TrafficWindow, dashboard_snapshot

__all__ = ["DashboardConsumer"]

REFRESH_SECONDS = 2.0
EVENT_SETTLE_SECONDS = 0.1  # events in a burst share one snapshot
FORBIDDEN = 4403

logger = logging.getLogger(__name__)


class DashboardConsumer(AsyncJsonWebsocketConsumer):  # channels ships no types: Any
    """One open dashboard."""

    traffic: TrafficWindow
    wake: asyncio.Event
    refresher: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not (user.is_active and user.is_staff):
            await self.close(code=FORBIDDEN)
            return
        self.traffic, self.wake = TrafficWindow(), asyncio.Event()
        await self.channel_layer.group_add(GROUP, self.channel_name)
        await self.accept()
        self.refresher = asyncio.get_running_loop().create_task(self.refresh_forever())

    async def disconnect(self, code: int) -> None:
        if self.refresher is not None:
            self.refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.refresher
            await self.channel_layer.group_discard(GROUP, self.channel_name)

    async def refresh_forever(self) -> None:
        while True:
            try:
                await self.send_json(await dashboard_snapshot(self.traffic))
            except Exception:  # a bad read now is retried at the next refresh
                logger.exception("building the dashboard snapshot failed")
            self.wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(REFRESH_SECONDS):
                    await self.wake.wait()
                    await asyncio.sleep(EVENT_SETTLE_SECONDS)

    async def dashboard_event(self, message: dict[str, Any]) -> None:
        """A resilience event from any process: show it, then refresh the tables."""
        await self.send_json({"type": "event", **{k: v for k, v in message.items() if k != "type"}})
        self.wake.set()

    async def dashboard_traffic(self, message: dict[str, Any]) -> None:
        """A process's request counts for its last interval."""
        self.traffic.add(message, time.monotonic())
