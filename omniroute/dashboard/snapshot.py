"""What a dashboard shows, read now: the shared state (every process's, when the store is
Redis and the database is shared) plus the traffic the processes reported.

Plain JSON-ready dicts: the page renders them, the WebSocket sends them as they are.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from django.utils import timezone

from leases.selectors import lease_list_active
from resilience.api.health import health_full_payload
from resilience.domain.connection_state import ConnectionState
from resilience.services.connections import CONNECTION_PREFIX
from resilience.state import get_store
from routing.selectors import connection_names

__all__ = ["TrafficWindow", "dashboard_snapshot"]

TRAFFIC_WINDOW_SECONDS = 10.0
QUEUES_STALE_SECONDS = 5.0


@dataclass
class TrafficWindow:
    """The processes' traffic reports of the last ``TRAFFIC_WINDOW_SECONDS``, as one
    dashboard received them. The clock is injected (monotonic seconds)."""

    window: float = TRAFFIC_WINDOW_SECONDS
    reports: deque[tuple[float, dict[str, Any]]] = field(default_factory=deque)

    def add(self, report: dict[str, Any], now: float) -> None:
        self.reports.append((now, report))
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self.reports and now - self.reports[0][0] > self.window:
            self.reports.popleft()

    def summary(self, now: float) -> dict[str, Any]:
        """Requests per second and the error rate over the window, and every process's last
        reported queues (while fresh)."""
        self._trim(now)
        requests = sum(int(report["requests"]) for _, report in self.reports)
        errors = sum(int(report["errors"]) for _, report in self.reports)
        latest: dict[str, tuple[float, dict[str, Any]]] = {}
        for received, report in self.reports:
            latest[str(report["process"])] = (received, report)
        queues = [
            {"process": process, "kind": kind, "name": str(item[kind]),
             "queued": int(item["queued"]), "running": int(item.get("running", 0))}
            for process, (received, report) in sorted(latest.items())
            if now - received <= QUEUES_STALE_SECONDS
            for kind, items in (("gate", report["queues"].get("gates", [])),
                                ("queue", report["queues"].get("queues", [])))
            for item in items
        ]  # fmt: skip
        return {
            "requests_per_second": round(requests / self.window, 2),
            "error_rate": round(errors / requests, 4) if requests else 0.0,
            "requests": requests,
            "errors": errors,
            "window_seconds": self.window,
            "processes": len(latest),
            "queues": queues,
        }


def _leases() -> list[dict[str, Any]]:
    now = timezone.now()
    views = lease_list_active(now=now)
    names = connection_names({view.connection_id for view in views})
    return [
        {"id": view.id, "provider": view.provider, "connection_id": view.connection_id,
         "connection": names.get(view.connection_id, f"#{view.connection_id}"),
         "owner": view.owner_hash[:8], "generation": view.generation,
         "expires_in_s": round((view.expires_at - now).total_seconds(), 1)}
        for view in views
    ]  # fmt: skip


DatabaseCall = Callable[[Callable[..., Any]], Callable[..., Awaitable[Any]]]


async def _connections(now: float, db: DatabaseCall) -> list[dict[str, Any]]:
    """Connections cooling down or in a terminal state, soonest back first."""
    store = get_store()
    states = {
        int(key.removeprefix(CONNECTION_PREFIX)): ConnectionState.from_dict(raw)
        for key, raw in (await store.scan(CONNECTION_PREFIX)).items()
        if isinstance(raw, dict) and key.removeprefix(CONNECTION_PREFIX).isdigit()
    }
    out = {
        connection_id: state
        for connection_id, state in states.items()
        if state.is_terminal or state.remaining(now) > 0
    }
    names = await db(connection_names)(set(out))
    rows = [
        {"connection_id": connection_id, "connection": names.get(connection_id, "?"),
         "state": str(state.test_status), "terminal": state.is_terminal,
         "remaining_s": None if state.is_terminal else round(state.remaining(now), 1),
         "reason": state.last_error_type or state.last_error[:80]}
        for connection_id, state in out.items()
    ]  # fmt: skip
    return sorted(rows, key=lambda row: (row["terminal"], row["remaining_s"] or 0.0))


def _breakers(health: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"name": item["name"], "state": item["state"], "failures": item["failureCount"],
         "retry_in_s": round(item["retryAfterMs"] / 1000, 1)}
        for item in health["providerBreakers"]
    ]  # fmt: skip


def _locks(health: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"provider": lock["provider"], "connection_id": lock["connectionId"],
         "model": lock["model"], "reason": lock["reason"],
         "remaining_s": round(lock["remainingMs"] / 1000, 1)}
        for lock in health["lockouts"]
    ]  # fmt: skip


async def dashboard_snapshot(
    traffic: TrafficWindow,
    *,
    monotonic: float | None = None,
    db: DatabaseCall = database_sync_to_async,
) -> dict[str, Any]:
    """Everything the dashboard shows, now. ``db`` runs the database reads: Channels' wrapper
    in the consumer (it closes the connections it leaves behind); a sync view passes
    ``sync_to_async``, so the reads use the request's own connection, which stays open."""
    health = await health_full_payload()
    now = get_store().clock()
    return {
        "type": "snapshot",
        "at": time.time(),
        "status": health["status"],
        "store": health["store"],
        "breakers": _breakers(health),
        "connections": await _connections(now, db),
        "locked_models": _locks(health),
        "leases": await db(_leases)(),
        "traffic": traffic.summary(time.monotonic() if monotonic is None else monotonic),
    }
