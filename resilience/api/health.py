"""``/api/monitoring/health``, ``/api/resilience/reset``, ``/healthz`` and ``/readyz``.

Health reports ``degraded`` while a provider breaker is open or while the state store serves
from process-local state because Redis is unreachable. Readiness depends on
the database only: a Redis outage never makes the gateway "not ready".

Routing owns the configured breaker policies and the admission gates; it hands them in with
``resilience.hooks`` when the app is ready, so this module never imports routing. The operator
check is the management API's default permission (``DEFAULT_PERMISSION_CLASSES``).
"""

from __future__ import annotations

import logging
import time
from typing import Any, cast

from asgiref.sync import async_to_sync
from django.contrib.auth.models import AnonymousUser
from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.permissions import SAFE_METHODS, AllowAny, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from omniroute.core.state import (
    get_store,
    store_backend,
    store_degraded_reason,
    store_degraded_since,
)
from omniroute.core.store import StateStore
from resilience.hooks import hooks
from resilience.services.lockout_operations import LockView, lockout_list
from resilience.services.operations import (
    breaker_statuses,
    breakers_reset,
    health_status,
    timestamp,
)

CACHE_SECONDS = 1.0
DEGRADED: dict[str, Any] = {
    "status": "degraded",
    "error": "Health check partially unavailable",
    "providerBreakers": [],
    "windowGate": {},
    "lockouts": [],
    "admission": {"gates": [], "queues": []},
}
logger = logging.getLogger(__name__)


def admission_counts() -> dict[str, Any]:
    """This process's admission gates and queues, as routing reports them."""
    return hooks().admission_stats()


class _HealthCache:
    """The last full payload and when it was built (per process)."""

    payload: dict[str, Any] | None = None
    built_at: float = 0.0

    def fresh(self) -> dict[str, Any] | None:
        if self.payload is not None and time.monotonic() - self.built_at < CACHE_SECONDS:
            return self.payload
        return None

    def keep(self, payload: dict[str, Any]) -> dict[str, Any]:
        self.payload, self.built_at = payload, time.monotonic()
        return payload

    def drop(self) -> None:
        self.payload = None


_cache = _HealthCache()


def health_cache_drop() -> None:
    """Forget the cached payload: a reset shows at the next read."""
    _cache.drop()


def _store_section(store: StateStore) -> dict[str, Any]:
    reason = store_degraded_reason(store)
    since = store_degraded_since(store)
    return {
        "backend": store_backend(store),
        "degraded": reason is not None,
        "reason": reason,
        "since": None if since is None else timestamp(since),
    }


def _lockout_item(lock: LockView) -> dict[str, Any]:
    return {
        "provider": lock.provider,
        "connectionId": lock.connection_id,
        "model": lock.model,
        "reason": lock.reason,
        "remainingMs": lock.remaining_ms,
        "until": int(lock.until * 1000),
        "failureCount": lock.failure_count,
    }


def _with_store_status(payload: dict[str, Any], store: dict[str, Any]) -> dict[str, Any]:
    """``payload`` with the store section; while the store is degraded, so is the status."""
    payload = payload | {"store": store}
    if store["degraded"]:
        reason = f"state store unreachable: {store['reason']}; serving from process-local state"
        payload |= {"status": "degraded", "reason": reason}
    return payload


async def health_full_payload() -> dict[str, Any]:
    """The health payload built now (no cache): what an operator sees."""
    store = get_store()
    policies = await hooks().health_policies()
    statuses = await breaker_statuses(
        store=store, policies=policies.breakers, default=policies.default
    )
    locks = await lockout_list(store=store)
    payload = {
        "status": health_status(statuses),
        "timestamp": timestamp(store.clock()),
        "providerBreakers": statuses,
        "windowGate": {"enabled": policies.window_gate_enabled},
        "lockouts": [_lockout_item(lock) for lock in locks],
        "admission": hooks().admission_stats(),
    }
    # Read last: the calls above are what notices an outage (or the recovery).
    return _with_store_status(payload, _store_section(store))


def health_payload() -> dict[str, Any]:
    """The full health payload, cached for one second (but rebuilt at once when the store
    became degraded or recovered since); degraded, never an error."""
    cached = _cache.fresh()
    store_degraded = store_degraded_reason(get_store()) is not None
    if cached is not None and cached["store"]["degraded"] == store_degraded:
        return cached
    try:
        return _cache.keep(async_to_sync(health_full_payload)())
    except Exception:
        logger.exception("health payload unavailable")
        fallback = DEGRADED | {"timestamp": timestamp(time.time())}
        return _with_store_status(fallback, _store_section(get_store()))


def _operator_permissions() -> list[BasePermission]:
    """The management API's default permissions: who counts as an operator."""
    classes = cast("list[type[BasePermission]]", api_settings.DEFAULT_PERMISSION_CLASSES)
    return [permission() for permission in classes]


class HealthApi(APIView):
    """Anyone gets the status; an operator also gets every breaker. DELETE resets them all."""

    def get_permissions(self) -> list[BasePermission]:
        if self.request.method in SAFE_METHODS:
            return [AllowAny()]
        return _operator_permissions()

    def perform_authentication(self, request: Request) -> None:
        # A probe presenting a stale key still gets the status: treat it as anonymous.
        try:
            request.user  # noqa: B018  (evaluating it runs the authenticators)
        except exceptions.AuthenticationFailed:
            request.user, request.auth = AnonymousUser(), None

    @extend_schema(
        summary="The gateway's health (and, for an operator, every breaker)",
        responses={200: OpenApiResponse(description="Health and breaker states")},
    )
    def get(self, request: Request) -> Response:
        payload = health_payload()
        operator = all(p.has_permission(request, self) for p in _operator_permissions())
        return Response(payload if operator else {"status": payload["status"]})

    @extend_schema(
        summary="Reset and forget every breaker",
        responses={200: OpenApiResponse(description="Breakers reset and forgotten")},
    )
    def delete(self, request: Request) -> Response:
        count = breakers_reset(forget=True)
        health_cache_drop()
        message = f"Reset {count} circuit breaker(s) to healthy state"
        return Response({"success": True, "message": message, "resetCount": count})


class BreakerResetApi(APIView):
    """``POST /api/resilience/reset``: reset every known breaker to CLOSED."""

    @extend_schema(
        summary="Reset every breaker to closed",
        request=None,
        responses={200: OpenApiResponse(description="Reset count")},
    )
    def post(self, request: Request) -> Response:
        count = breakers_reset()
        health_cache_drop()
        return Response(
            {"ok": True, "resetCount": count, "message": f"Reset {count} circuit breaker(s)"}
        )


@require_GET
def liveness(request: HttpRequest) -> JsonResponse:
    """``GET /healthz``: 200 whenever the process serves; nothing else is consulted."""
    return JsonResponse({"status": "alive"})


def database_error() -> str | None:
    """Why the database does not answer a trivial query; ``None`` when it does."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as error:
        return f"{type(error).__name__}: {error}".strip()
    return None


class ReadinessApi(APIView):
    """``GET /readyz``: 200 when the database answers, else 503. Redis is never consulted.

    The 503 names no error: the probe is unauthenticated, and a driver's message can carry a
    host, a user or a password. The reason goes to the log only.
    """

    authentication_classes: list[type[Any]] = []
    permission_classes = [AllowAny]

    @extend_schema(
        summary="Readiness: whether the database answers",
        responses={
            200: OpenApiResponse(description="Ready: the database answers"),
            503: OpenApiResponse(description="Not ready: the database does not answer"),
        },
    )
    def get(self, request: Request) -> Response:
        error = database_error()
        if error is None:
            return Response({"status": "ready"})
        logger.warning("not ready: the database does not answer (%s)", error)
        return Response({"status": "not ready", "reason": "database unavailable"}, status=503)
