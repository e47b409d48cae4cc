"""``/api/monitoring/health`` and ``/api/resilience/reset``: breaker health and resets."""

from __future__ import annotations

import logging
import time
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib.auth.models import AnonymousUser
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from resilience.services.operations import (
    breaker_statuses,
    breakers_reset,
    health_status,
    timestamp,
)
from resilience.state import get_store
from routing.api.auth import IsOperator
from routing.snapshot import current_snapshot

CACHE_SECONDS = 1.0
DEGRADED: dict[str, Any] = {
    "status": "degraded",
    "error": "Health check partially unavailable",
    "providerBreakers": [],
    "windowGate": {},
}
logger = logging.getLogger(__name__)


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


async def _full_payload() -> dict[str, Any]:
    store = get_store()
    snapshot = await current_snapshot()
    statuses = await breaker_statuses(
        store=store,
        policies=snapshot.breaker_policies,
        default=snapshot.breaker_policy(""),
    )
    return {
        "status": health_status(statuses),
        "timestamp": timestamp(store.clock()),
        "providerBreakers": statuses,
        "windowGate": {"enabled": bool(snapshot.gate_policies)},
    }


def health_payload() -> dict[str, Any]:
    """The full health payload, cached for one second; degraded, never an error (§2.9)."""
    cached = _cache.fresh()
    if cached is not None:
        return cached
    try:
        return _cache.keep(async_to_sync(_full_payload)())
    except Exception:
        logger.exception("health payload unavailable")
        return DEGRADED | {"timestamp": timestamp(time.time())}


class HealthApi(APIView):
    """Anyone gets the status; an operator also gets every breaker. DELETE resets them all."""

    permission_classes = [AllowAny]

    def perform_authentication(self, request: Request) -> None:
        # A probe presenting a stale key still gets the status: treat it as anonymous.
        try:
            request.user  # noqa: B018  (evaluating it runs the authenticators)
        except exceptions.AuthenticationFailed:
            request.user, request.auth = AnonymousUser(), None

    @extend_schema(responses={200: OpenApiResponse(description="Health and breaker states")})
    def get(self, request: Request) -> Response:
        payload = health_payload()
        if not IsOperator().has_permission(request, self):
            return Response({"status": payload["status"]})
        return Response(payload)

    @extend_schema(responses={200: OpenApiResponse(description="Breakers reset and forgotten")})
    def delete(self, request: Request) -> Response:
        if not IsOperator().has_permission(request, self):
            self.permission_denied(request, message=IsOperator.message)
        count = breakers_reset(forget=True)
        _cache.drop()
        message = f"Reset {count} circuit breaker(s) to healthy state"
        return Response({"success": True, "message": message, "resetCount": count})


class BreakerResetApi(APIView):
    """``POST /api/resilience/reset``: reset every known breaker to CLOSED."""

    @extend_schema(request=None, responses={200: OpenApiResponse(description="Reset count")})
    def post(self, request: Request) -> Response:
        count = breakers_reset()
        _cache.drop()
        return Response(
            {"ok": True, "resetCount": count, "message": f"Reset {count} circuit breaker(s)"}
        )
