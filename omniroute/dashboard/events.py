"""What a process publishes to the dashboards: resilience events and its traffic.

Its traffic goes to the state store as well (see ``TrafficMeter``): a dashboard shows the
requests of the last seconds whenever it is opened, not only those made while it was open.

Publishing never slows or fails a request: a send is a background task on the running loop,
bounded (events beyond ``MAX_IN_FLIGHT`` unsent ones are dropped and counted), with a short
timeout, and an unreachable channel layer is logged at debug level only. With no running
loop (a management command), events are not published.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
import time
from collections.abc import Callable, Coroutine
from typing import Any

from channels.layers import get_channel_layer

from omniroute.core.events import ResilienceEvent
from omniroute.core.state import get_store
from omniroute.core.store import StateStore
from resilience.api.health import admission_counts
from routing.proxy.telemetry import AccessRecord

__all__ = [
    "GROUP",
    "PROCESS",
    "TRAFFIC_PREFIX",
    "TRAFFIC_WINDOW_SECONDS",
    "publisher",
    "traffic",
]

GROUP = "omniroute.dashboard"
PROCESS = f"{socket.gethostname()}:{os.getpid()}"
MAX_IN_FLIGHT = 64
SEND_TIMEOUT_SECONDS = 1.0
TRAFFIC_INTERVAL_SECONDS = 1.0
TRAFFIC_WINDOW_SECONDS = 10.0  # what the dashboard's traffic figures cover
TRAFFIC_PREFIX = "dashboard:traffic:"  # + process + report number, in the state store

logger = logging.getLogger(__name__)


class Publisher:
    """Sends messages to the dashboards' group from whatever loop is running."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[None]] = set()
        self.dropped = 0

    def send(self, message: dict[str, Any]) -> None:
        """Deliver ``message`` to the dashboards' group in the background."""
        self.spawn(self.deliver(message))

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` in the background on the running loop, within the bound."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            work.close()
            return
        if len(self.tasks) >= MAX_IN_FLIGHT:
            self.dropped += 1
            work.close()
            return
        task = loop.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    @staticmethod
    async def deliver(message: dict[str, Any]) -> None:
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
        self.send(
            {
                "type": "dashboard.event",
                "kind": event.kind,
                "subject": event.subject,
                "summary": event.summary,
                "detail": event.detail,
                "request_id": event.request_id,
                "at": time.time(),
                "process": PROCESS,
            }
        )

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
    """This process's finished requests, reported to the state store per interval.

    Each report (requests, errors, fail-overs, the queues) is kept in the store for
    ``TRAFFIC_WINDOW_SECONDS`` under a key of its own, so a dashboard opened later, or connected
    to another process, still counts it; a note to the dashboards' group then tells the open
    ones to show it. The first request after a quiet interval is reported at once, later ones
    at most once per ``TRAFFIC_INTERVAL_SECONDS``.
    """

    def __init__(self, publisher: Publisher, store: Callable[[], StateStore] = get_store) -> None:
        self.publisher = publisher
        self.store = store
        self.requests = self.errors = self.failovers = 0
        self.reported = -math.inf  # monotonic seconds of the last report
        self.sequence = 0
        self.timer: asyncio.TimerHandle | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def record(self, record: AccessRecord) -> None:
        """The ``on_request`` listener: count one finished request (every status counts)."""
        self.requests += 1
        self.errors += is_error(record.status)
        self.failovers += record.failed_over
        if self.timer is not None and self.loop is not None and not self.loop.is_closed():
            return  # a report is due already
        try:
            self.loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        delay = max(0.0, self.reported + TRAFFIC_INTERVAL_SECONDS - time.monotonic())
        self.timer = self.loop.call_later(delay, self.flush)

    def flush(self) -> None:
        """Report the counts since the last report and start a new interval."""
        report: dict[str, Any] = {
            "process": PROCESS,
            "requests": self.requests,
            "errors": self.errors,
            "failovers": self.failovers,
            "queues": admission_counts(),
        }
        self.requests = self.errors = self.failovers = 0
        self.reported = time.monotonic()
        self.timer = None
        self.sequence += 1
        self.publisher.spawn(self.publish(report, self.sequence))

    async def publish(self, report: dict[str, Any], sequence: int) -> None:
        """Keep the report in the store for the window, then wake the open dashboards."""
        store = self.store()
        key = f"{TRAFFIC_PREFIX}{PROCESS}:{sequence}"
        try:
            async with asyncio.timeout(SEND_TIMEOUT_SECONDS):
                await store.set(key, {**report, "at": store.clock()}, ttl=TRAFFIC_WINDOW_SECONDS)
        except Exception as error:  # no dashboard is worth a failed request
            logger.debug("storing the traffic report failed: %r", error)
        await self.publisher.deliver({"type": "dashboard.traffic", "process": PROCESS})


publisher = Publisher()
traffic = TrafficMeter(publisher)
