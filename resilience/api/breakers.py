"""``/api/breakers/``: each provider's breaker with its transitions, reset one, some or all.

The list reads the breakers' durable rows, as the admin's breaker list does; each shows the
status object of ``GET /api/monitoring/health`` (state, failures, the time left, the transition
history). Resets call ``breakers_reset``, the service behind the admin's action and
``POST /api/resilience/reset``.
"""

from __future__ import annotations

import time
from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from omniroute.core.fields import JsonBooleanField
from omniroute.core.listing import ConfigListMixin
from resilience.api.health import health_cache_drop
from resilience.domain.breaker.machine import Breaker
from resilience.models import CircuitBreaker
from resilience.persistence import policy_from_dict
from resilience.services.operations import breakers_reset


class CircuitBreakerSerializer(serializers.ModelSerializer[CircuitBreaker]):
    """One provider's breaker: its name and its status, transitions included."""

    status = serializers.SerializerMethodField(
        help_text="The health API's status object: state, failureCount, retryAfterMs, "
        "openCycleCount, transitionHistory (from, to, timestamp, failureCount, reason)..."
    )

    class Meta:
        model = CircuitBreaker
        fields = ("name", "state", "failure_count", "updated_at", "status")
        read_only_fields = fields

    def get_status(self, row: CircuitBreaker) -> dict[str, Any]:
        options = row.options or {}
        return Breaker.from_dict(options).status(
            policy_from_dict(options.get("policy")), time.time()
        )


class BreakerResetSerializer(serializers.Serializer[Any]):
    """Which breakers to reset: ``names``, or ``all``."""

    names = serializers.ListField(child=serializers.CharField(), required=False, allow_empty=False)
    all = JsonBooleanField(required=False, default=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if bool(attrs.get("names")) == attrs["all"]:
            raise serializers.ValidationError({"names": "Give the breakers' names, or all: true."})
        return attrs


@extend_schema(tags=["breakers"])
class CircuitBreakerViewSet(
    ConfigListMixin,
    mixins.DestroyModelMixin,
    viewsets.ReadOnlyModelViewSet[CircuitBreaker],
):
    """The providers' breakers, by name; filter ``?state=``, search ``?search=``."""

    queryset = CircuitBreaker.objects.order_by("name")
    serializer_class = CircuitBreakerSerializer
    lookup_value_regex = "[^/]+"
    filter_fields = {"state": "state"}
    search_fields = ("name",)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, pk: str | None = None) -> Response:
        """Forget this breaker (its record and its row): it starts afresh, closed, at the
        provider's next request. The admin's delete, done through the reset service."""
        row = self.get_object()
        breakers_reset(names=[row.name], forget=True)
        health_cache_drop()
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None)
    @action(detail=True, methods=["post"])
    def reset(self, request: Request, pk: str | None = None) -> Response:
        """Reset this breaker to closed."""
        row = self.get_object()
        breakers_reset(names=[row.name])
        health_cache_drop()
        row.refresh_from_db()
        return Response(self.get_serializer(row).data)

    @extend_schema(
        operation_id="api_breakers_reset_many",
        request=BreakerResetSerializer,
        responses={200: OpenApiResponse(description='`{"ok", "resetCount"}`')},
    )
    @action(detail=False, methods=["post"], url_path="reset")
    def reset_many(self, request: Request) -> Response:
        """Reset the named breakers (``{"names": [...]}``), or every one (``{"all": true}``,
        like ``POST /api/resilience/reset``)."""
        data = BreakerResetSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        names = None if data.validated_data["all"] else data.validated_data["names"]
        if names is not None:
            known = set(
                CircuitBreaker.objects.filter(name__in=names).values_list("name", flat=True)
            )
            if unknown := sorted(set(names) - known):
                raise serializers.ValidationError(
                    {"names": f"No such breaker: {', '.join(unknown)}."}
                )
        count = breakers_reset(names=names)
        health_cache_drop()
        return Response({"ok": True, "resetCount": count})
