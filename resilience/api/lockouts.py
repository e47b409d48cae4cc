"""``/api/resilience/model-cooldowns``: list the active model lockouts, remove some or all.

A DELETE takes ``{"all": true}`` or a provider and model (docs/resilience.md, "Pair locks").
Auth, permission and the error shape are the management API's defaults (an invalid body is a
400 naming its fields).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from omniroute.core.fields import JsonBooleanField
from omniroute.core.listing import MAX_PAGE_SIZE, page_of
from omniroute.core.parsers import BoundedJSONParser
from resilience.services.lockout_operations import (
    LabelledLock,
    lockouts_active,
    lockouts_clear,
    lockouts_clear_matching,
    lockouts_unlock,
)

REQUIRED = "provider and model are required"


def _iso(epoch_seconds: float) -> str:
    return dt.datetime.fromtimestamp(epoch_seconds, dt.UTC).isoformat()


def _item(row: LabelledLock) -> dict[str, Any]:
    lock = row.lock
    return {
        "provider": lock.provider,
        "connectionId": lock.connection_id,
        "accountLabel": row.account_label,
        "model": lock.model,
        "reason": lock.reason,
        "timerClass": lock.timer or "unknown",
        "remainingMs": lock.remaining_ms,
        "failureCount": lock.failure_count,
        "lockedAt": _iso(lock.locked_at),
        "lockedAtMs": int(lock.locked_at * 1000),
        "until": int(lock.until * 1000),
        "expiresAt": _iso(lock.until),
        "exact": lock.exact,
    }


class ModelCooldownItemSerializer(serializers.Serializer[Any]):
    """One active lock (documentation only: the view builds the dict)."""

    provider = serializers.CharField()
    connectionId = serializers.IntegerField()
    accountLabel = serializers.CharField(help_text="The connection's name.")
    model = serializers.CharField()
    reason = serializers.CharField()
    timerClass = serializers.CharField(
        help_text="self_set (transient failures: capped, panic may override), upstream_hinted, "
        "quota, operator, or unknown."
    )
    remainingMs = serializers.IntegerField()
    failureCount = serializers.IntegerField()
    lockedAt = serializers.DateTimeField()
    lockedAtMs = serializers.IntegerField()
    until = serializers.IntegerField(help_text="Epoch milliseconds.")
    expiresAt = serializers.DateTimeField()
    exact = serializers.BooleanField(help_text="Locks the exact (provider, connection, model).")


WINDOW_PARAMETERS = [
    OpenApiParameter("limit", int, description=f"At most this many items (up to {MAX_PAGE_SIZE})."),
    OpenApiParameter("offset", int, description="Skip this many items first."),
]


class ModelCooldownsApi(APIView):
    """GET the active model lockouts; DELETE them all (or all of a provider's or a
    connection's), or one model's."""

    parser_classes = [BoundedJSONParser]

    class DeleteInputSerializer(serializers.Serializer[Any]):
        all = JsonBooleanField(required=False, default=False)
        provider = serializers.CharField(required=False, allow_blank=True)
        model = serializers.CharField(required=False, allow_blank=True)
        connectionId = serializers.IntegerField(required=False, allow_null=True)
        connection = serializers.IntegerField(
            required=False, allow_null=True, help_text="Alias of connectionId."
        )

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            connection = attrs.get("connectionId")
            attrs["connectionId"] = attrs.get("connection") if connection is None else connection
            if attrs["all"]:
                return attrs
            missing = [name for name in ("provider", "model") if not attrs.get(name)]
            if missing:
                raise serializers.ValidationError(dict.fromkeys(missing, REQUIRED))
            return attrs

    @extend_schema(
        summary="The active model lockouts",
        parameters=WINDOW_PARAMETERS,
        responses={
            200: inline_serializer(
                "ModelCooldowns",
                {
                    "items": ModelCooldownItemSerializer(many=True),
                    "total": serializers.IntegerField(help_text="Every active lock, all pages."),
                },
            )
        },
    )
    def get(self, request: Request) -> Response:
        items, total = page_of(request, lockouts_active())
        return Response({"items": [_item(row) for row in items], "total": total})

    @extend_schema(
        summary="Remove model lockouts",
        description='JSON body: `{"all": true}` clears every lock, and with `"provider"` and/or '
        '`"connectionId"` (alias `connection`) only the locks of that provider\'s connections, '
        'of that connection, or of both; `{"provider", "model", "connectionId"?}` unlocks the '
        "model on one connection, or on all of the provider's connections.",
        responses={
            200: OpenApiResponse(
                description='`{"ok", "clearedAll"}` for an unnarrowed `all`, else `{"ok", '
                '"removed", "removedCount", "scope"}`: `removed` is a boolean (at least one '
                "lock was removed), `removedCount` the number of locks removed, `scope` one of "
                "`provider`, `connection` (a narrowed `all`), `provider-model` or "
                "`connection-model`."
            ),
            400: OpenApiResponse(description="provider and model are required (or a bad body)"),
        },
    )
    def delete(self, request: Request) -> Response:
        data = self.DeleteInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        provider = data.validated_data.get("provider") or None
        connection_id = data.validated_data["connectionId"]
        if data.validated_data["all"]:
            if provider is None and connection_id is None:
                lockouts_clear()
                return Response({"ok": True, "clearedAll": True})
            count = lockouts_clear_matching(provider=provider, connection_id=connection_id)
            scope = "provider" if connection_id is None else "connection"
        else:
            count = lockouts_unlock(
                provider=data.validated_data["provider"],
                model=data.validated_data["model"],
                connection_id=connection_id,
            )
            scope = "provider-model" if connection_id is None else "connection-model"
        return Response({"ok": True, "removed": count > 0, "removedCount": count, "scope": scope})
