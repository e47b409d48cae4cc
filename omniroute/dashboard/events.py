"""What a process publishes to the dashboards: resilience events and its traffic.

Publishing never slows or fails a request: a send is a background task on the running loop,
bounded (events beyond ``MAX_IN_FLIGHT`` unsent ones are dropped and counted), with a short
timeout, and an unreachable channel layer is logged at debug level only. With no running
loop (a management command), events are not published.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from typing import Any

from channels.layers import get_channel_layer

from resilience.api.health import admission_counts
from resilience.events import ResilienceEvent

__all__ = ["GROUP", "PROCESS", "publisher", "traffic"]

GROUP = "omniroute.dashboard"
PROCESS = f"{socket.gethostname()}:{os.getpid()}"
MAX_IN_FLIGHT = 64
SEND_TIMEOUT_SECONDS = 1.0
TRAFFIC_INTERVAL_SECONDS = 1.0

logger = logging.getLogger(__name__)


class Publisher:
    """Sends messages to the dashboards' group from whatever loop is running."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[None]] = set()
        self.dropped = 0

    def send(self, message: dict[str, Any]) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if len(self.tasks) >= MAX_IN_FLIGHT:
            self.dropped += 1
            return
        task = loop.create_task(self._send(message))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    @staticmethod
    async def _send(message: dict[str, Any]) -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            async with asyncio.timeout(SEND_TIMEOUT_SECONDS):
                await layer.group_send(GROUP, message)
        except Exception as error:  # no dashboard is worth a failed request
            logger.debug("publishing to the dashboards failed: %r", error)

    def on_event(self, event: ResilienceEvent) -> None:
        """The resilience event listener (registered in ``omniroute.apps``)."""
        self.send({
            "type": "dashboard.event", "kind": event.kind, "subject": event.subject,
            "summary": event.summary, "detail": event.detail, "at": time.time(),
            "process": PROCESS,
        })  # fmt: skip

    async def settle(self) -> None:
        """Wait for the sends of the running loop (tests; a process shutting down)."""
        loop = asyncio.get_running_loop()
        pending = [task for task in self.tasks if task.get_loop() is loop]
        await asyncio.gather(*pending, return_exceptions=True)


def is_error(status: int) -> bool:
    """What the dashboard's error rate counts: the gateway could not serve the request
    (5xx, or 429 when every target was busy or cooling); client mistakes (other 4xx) are not."""
    return status >= 500 or status == 429


class TrafficMeter:
    """This process's finished requests, published once a second while there are any."""

    def __init__(self, publisher: Publisher) -> None:
        self.publisher = publisher
        self.requests = 0
        self.errors = 0
        self.since = time.monotonic()
        self.timer: asyncio.TimerHandle | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def record(self, status: int) -> None:
        self.requests += 1
        self.errors += is_error(status)
        if self.timer is not None and self.loop is not None and not self.loop.is_closed():
            return  # a report is due already
        try:
            self.loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self.since = time.monotonic()
        self.timer = self.loop.call_later(TRAFFIC_INTERVAL_SECONDS, self.flush)

    def flush(self) -> None:
        """Publish the counts since the last report and start a new interval."""
        now = time.monotonic()
        requests, errors, seconds = self.requests, self.errors, max(now - self.since, 1e-3)
        self.requests = self.errors = 0
        self.since, self.timer = now, None
        self.publisher.send({
            "type": "dashboard.traffic", "process": PROCESS, "requests": requests,
            "errors": errors, "seconds": round(seconds, 3), "queues": admission_counts(),
        })  # fmt: skip


publisher = Publisher()
traffic = TrafficMeter(publisher)
