"""The dashboard's WebSocket: staff only; pushes a snapshot at once, after every event or
traffic report (coalesced) and every ``REFRESH_SECONDS``, and relays every process's events as
they come; what the browser sends is ignored. An event a request caused links to that
request's page in the request log when the log is on (docs/operating.md, "Request log")."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.urls import reverse

from omniroute.dashboard.events import GROUP
from omniroute.dashboard.snapshot import dashboard_snapshot

__all__ = ["DashboardConsumer"]

REFRESH_SECONDS = 2.0
EVENT_SETTLE_SECONDS = 0.1  # events in a burst share one snapshot
FORBIDDEN = 4403

logger = logging.getLogger(__name__)


class DashboardConsumer(AsyncJsonWebsocketConsumer):  # channels ships no types: Any
    """One open dashboard."""

    wake: asyncio.Event
    refresher: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not (user.is_active and user.is_staff):
            await self.close(code=FORBIDDEN)
            return
        self.wake = asyncio.Event()
        await self.channel_layer.group_add(GROUP, self.channel_name)
        await self.accept()
        self.refresher = asyncio.get_running_loop().create_task(self.refresh_forever())

    async def disconnect(self, code: int) -> None:
        if self.refresher is not None:
            self.refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.refresher
            await self.channel_layer.group_discard(GROUP, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The dashboard only sends: whatever a browser sends (text, binary, JSON or not) is
        ignored, never decoded."""

    async def refresh_forever(self) -> None:
        while True:
            try:
                await self.send_json(await dashboard_snapshot())
            except Exception:  # a bad read now is retried at the next refresh
                logger.exception("building the dashboard snapshot failed")
            self.wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(REFRESH_SECONDS):
                    await self.wake.wait()
                    await asyncio.sleep(EVENT_SETTLE_SECONDS)

    async def dashboard_event(self, message: dict[str, Any]) -> None:
        """A resilience event from any process: show it, then refresh the tables."""
        event = {"type": "event", **{k: v for k, v in message.items() if k != "type"}}
        event["request_url"] = request_url(str(message.get("request_id") or ""))
        await self.send_json(event)
        self.wake.set()

    async def dashboard_traffic(self, message: dict[str, Any]) -> None:
        """A process stored its latest request counts: show them now."""
        self.wake.set()


def request_url(request_id: str) -> str:
    """The admin page of the request ``request_id`` in the request log (``""``: no request, or
    the log is off)."""
    if not request_id or not settings.REQUEST_LOG_ENABLED:
        return ""
    return reverse("admin:requestlog_requestlogentry_by_request_id", args=[request_id])
