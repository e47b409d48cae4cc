"""What a dashboard shows, read now: the shared state (every process's, when the store is
Redis and the database is shared), the traffic the processes reported to the store included.

Plain JSON-ready dicts: the page renders them, the WebSocket sends them as they are.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from channels.db import database_sync_to_async
from django.utils import timezone

from leases.interface import lease_list_active
from omniroute.core.state import get_store
from omniroute.dashboard.events import TRAFFIC_PREFIX, TRAFFIC_WINDOW_SECONDS
from resilience.api.health import health_full_payload
from resilience.domain.connection_state import ConnectionState
from resilience.services.connections import CONNECTION_PREFIX
from routing.selectors import connection_names

__all__ = ["dashboard_snapshot", "traffic_summary"]

QUEUES_STALE_SECONDS = 5.0


def traffic_summary(
    reports: Iterable[Mapping[str, Any]], now: float, window: float = TRAFFIC_WINDOW_SECONDS
) -> dict[str, Any]:
    """The processes' reports of the last ``window`` seconds (``at`` and ``now`` on the store's
    clock): requests per second, the error rate, the fail-overs, how many processes served
    (none: ``idle``), and every process's last reported queues while fresh."""
    recent = sorted(
        (report for report in reports if now - float(report["at"]) <= window),
        key=lambda report: float(report["at"]),
    )
    requests = sum(int(report["requests"]) for report in recent)
    errors = sum(int(report["errors"]) for report in recent)
    latest = {str(report["process"]): report for report in recent}
    return {
        "requests_per_second": round(requests / window, 2),
        "error_rate": round(errors / requests, 4) if requests else 0.0,
        "requests": requests,
        "errors": errors,
        "failovers": sum(int(report.get("failovers", 0)) for report in recent),
        "window_seconds": window,
        "processes": len(latest),
        "idle": not latest,
        "queues": _queues(latest, now),
    }


def _queues(latest: Mapping[str, Mapping[str, Any]], now: float) -> list[dict[str, Any]]:
    return [
        {
            "process": process,
            "kind": kind,
            "name": str(item[kind]),
            "queued": int(item["queued"]),
            "running": int(item.get("running", 0)),
        }
        for process, report in sorted(latest.items())
        if now - float(report["at"]) <= QUEUES_STALE_SECONDS
        for kind, items in (
            ("gate", report["queues"].get("gates", [])),
            ("queue", report["queues"].get("queues", [])),
        )
        for item in items
    ]


async def _traffic(now: float) -> dict[str, Any]:
    """Every process's traffic reports still in the store (they expire after the window)."""
    stored = await get_store().scan(TRAFFIC_PREFIX)
    return traffic_summary([report for report in stored.values() if isinstance(report, dict)], now)


def _leases() -> list[dict[str, Any]]:
    now = timezone.now()
    views = lease_list_active(now=now)
    names = connection_names({view.connection_id for view in views})
    return [
        {
            "id": view.id,
            "provider": view.provider,
            "connection_id": view.connection_id,
            "connection": names.get(view.connection_id, f"#{view.connection_id}"),
            "owner": view.owner_hash[:8],
            "generation": view.generation,
            "expires_in_s": round((view.expires_at - now).total_seconds(), 1),
        }
        for view in views
    ]


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
        {
            "connection_id": connection_id,
            "connection": names.get(connection_id, "?"),
            "state": str(state.test_status),
            "terminal": state.is_terminal,
            "remaining_s": None if state.is_terminal else round(state.remaining(now), 1),
            "reason": state.last_error_type or state.last_error[:80],
        }
        for connection_id, state in out.items()
    ]
    return sorted(rows, key=lambda row: (row["terminal"], row["remaining_s"] or 0.0))


def _breakers(health: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "name": item["name"],
            "state": item["state"],
            "failures": item["failureCount"],
            "retry_in_s": round(item["retryAfterMs"] / 1000, 1),
        }
        for item in health["providerBreakers"]
    ]


def _locks(health: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "provider": lock["provider"],
            "connection_id": lock["connectionId"],
            "model": lock["model"],
            "reason": lock["reason"],
            "remaining_s": round(lock["remainingMs"] / 1000, 1),
        }
        for lock in health["lockouts"]
    ]


async def dashboard_snapshot(*, db: DatabaseCall = database_sync_to_async) -> dict[str, Any]:
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
        "traffic": await _traffic(now),
    }
