"""``GET /api/sessions`` and ``POST /api/sessions/<sessionId>/revoke``: exclusive sessions for
operators.

A session is an active lease, named ``lease:<connectionId>`` (one lease per connection at a
time). The list shows only what an operator needs to see which connection is held and how
much it is used: never the owner token or its hash, the generation, the key or the expiry.
Revoking ends the lease as the admin's "Revoke (invalidate)" does, through
``leases.services.lease_invalidate``; the client's next request under it answers
``LEASE_REQUIRED``. Auth and the error shape are the management API's defaults.
"""

from __future__ import annotations

import re
from typing import Any

from asgiref.sync import async_to_sync
from django.utils import timezone
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from leases.access import routing_access
from leases.activity import lease_activity_read
from leases.domain.states import DEFAULT_REVOKE_REASON, REVOKE_REASONS, LeaseOutcome
from leases.records import LeaseView
from leases.selectors import lease_list_sessions, lease_on_connection
from leases.services import lease_invalidate
from omniroute.core.listing import MAX_PAGE_SIZE, MAX_ROW_ID, page_of

SESSION_PREFIX = "lease:"
ROW_ID = re.compile(r"[0-9]{1,19}")
SESSION_ID = re.compile(r"lease:([1-9][0-9]{0,18})")  # a row id, as the list shows it


def session_id(connection_id: int) -> str:
    """The session's public name: ``lease:<connectionId>``."""
    return f"{SESSION_PREFIX}{connection_id}"


class ExclusiveSessionSerializer(serializers.Serializer[Any]):
    """One exclusive session (documentation only: the view builds the dict)."""

    sessionId = serializers.CharField(help_text="lease:<connectionId>")
    connectionId = serializers.IntegerField()
    connectionName = serializers.CharField(allow_null=True)
    active = serializers.BooleanField(
        help_text="A request began on the session within the last 30 seconds."
    )
    ageMs = serializers.IntegerField(help_text="Since the lease was acquired (or moved here).")
    requestCount = serializers.IntegerField(help_text="Managed requests bound under the lease.")
    leaseBacked = serializers.BooleanField()


def _sessions(views: list[LeaseView]) -> list[dict[str, Any]]:
    now = timezone.now()
    names = routing_access().connection_names({view.connection_id for view in views})
    activity = async_to_sync(lease_activity_read)(lease_ids=[view.id for view in views])
    return [
        {
            "sessionId": session_id(view.connection_id),
            "connectionId": view.connection_id,
            "connectionName": names.get(view.connection_id),
            "active": activity[view.id].active,
            "ageMs": max(0, round((now - view.acquired_at).total_seconds() * 1000)),
            "requestCount": activity[view.id].request_count,
            "leaseBacked": True,
        }
        for view in views
    ]


def _connection_filter(request: Request) -> int | None:
    raw = request.query_params.get("connectionId")
    if not raw:
        return None
    if ROW_ID.fullmatch(raw) is None or int(raw) > MAX_ROW_ID:  # ASCII digits, bounded
        raise exceptions.ValidationError({"connectionId": ["A connection id."]})
    return int(raw)


class ExclusiveSessionsApi(APIView):
    """The active exclusive sessions, by connection."""

    @extend_schema(
        summary="The active exclusive sessions",
        parameters=[
            OpenApiParameter("provider", str, description="Only this provider's sessions."),
            OpenApiParameter("connectionId", int, description="Only this connection's session."),
            OpenApiParameter(
                "limit", int, description=f"At most this many (up to {MAX_PAGE_SIZE})."
            ),
            OpenApiParameter("offset", int, description="Skip this many first."),
        ],
        responses={
            200: inline_serializer(
                "ExclusiveSessions",
                {
                    "exclusiveSessions": ExclusiveSessionSerializer(many=True),
                    "total": serializers.IntegerField(help_text="Every session, all pages."),
                },
            )
        },
    )
    def get(self, request: Request) -> Response:
        views = lease_list_sessions(
            provider=request.query_params.get("provider") or None,
            connection_id=_connection_filter(request),
        )
        page, total = page_of(request, views)
        return Response({"exclusiveSessions": _sessions(page), "total": total})


class RevokeInputSerializer(serializers.Serializer[Any]):
    """Why the operator ends the session (recorded as the lease's end reason)."""

    reason = serializers.ChoiceField(
        choices=[reason.value for reason in REVOKE_REASONS],
        default=DEFAULT_REVOKE_REASON.value,
    )


class ExclusiveSessionRevokeApi(APIView):
    """End one exclusive session now, as the admin's revoke action does."""

    @extend_schema(
        summary="Revoke an exclusive session",
        request=RevokeInputSerializer,
        responses={
            200: OpenApiResponse(description='`{"revoked": true, "sessionId", "reason"}`'),
            404: OpenApiResponse(description="No active session by that id."),
        },
    )
    def post(self, request: Request, session: str) -> Response:
        match = SESSION_ID.fullmatch(session)
        if match is None or int(match.group(1)) > MAX_ROW_ID:
            raise exceptions.NotFound(f"There is no session {session!r}.")
        data = RevokeInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        reason = next(r for r in REVOKE_REASONS if r.value == data.validated_data["reason"])
        now = timezone.now()
        lease = lease_on_connection(connection_id=int(match.group(1)), now=now)
        result = None
        if lease is not None:
            result = lease_invalidate(
                owner_hash=lease.owner_hash,
                generation=lease.generation,
                api_key_id=lease.api_key_id,
                reason=reason,
                now=now,
                lease_id=lease.id,  # the session named, not the owner's lease after a move
            )
        if result is None or result.outcome is not LeaseOutcome.INVALIDATED:
            raise exceptions.NotFound(f"There is no active session {session!r}.")
        return Response({"revoked": True, "sessionId": session, "reason": reason.value})
