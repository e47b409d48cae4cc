"""``/api/affinity-pins/``: which connection each client session is pinned to, and clearing pins.

The list reads the pins' durable copy, as the admin's does (a pin that only slid forward may
lag the live one by up to a minute). Clearing goes through ``routing.services.affinity``, which
clears the live pin in the state store too: those sessions choose a connection afresh at their
next request. Only the session's hash is kept, and only its first characters are shown.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from omniroute.core.listing import MAX_ROW_ID, ConfigListMixin
from routing.models import SessionAffinityPin
from routing.services.affinity import affinity_pins_clear, affinity_pins_clear_all

HASH_SHOWN_CHARS = 12  # as many as the admin shows: enough to tell sessions apart


class SessionAffinityPinSerializer(serializers.ModelSerializer[SessionAffinityPin]):
    """One session's pin: the provider, the connection and when it lapses."""

    session = serializers.SerializerMethodField(help_text="The start of the session's hash.")
    connection_name = serializers.CharField(source="connection.name", read_only=True)

    class Meta:
        model = SessionAffinityPin
        fields = (
            "id",
            "session",
            "provider",
            "connection",
            "connection_name",
            "created_at",
            "last_used_at",
            "expires_at",
        )
        read_only_fields = fields

    def get_session(self, pin: SessionAffinityPin) -> str:
        return pin.key_hash[:HASH_SHOWN_CHARS]


class PinClearSerializer(serializers.Serializer[Any]):
    """The pins to clear, by id."""

    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ROW_ID), allow_empty=False
    )


CLEARED = OpenApiResponse(description='`{"cleared": n}`: how many pins went.')


@extend_schema(tags=["affinity"])
class SessionAffinityPinViewSet(ConfigListMixin, viewsets.ReadOnlyModelViewSet[SessionAffinityPin]):
    """Session-affinity pins; filter ``?provider=``, search the session hash with ``?search=``."""

    queryset = SessionAffinityPin.objects.select_related("connection").order_by(
        "-last_used_at", "id"
    )
    serializer_class = SessionAffinityPinSerializer
    filter_fields = {"provider": "provider"}
    search_fields = ("key_hash",)

    @extend_schema(responses={200: CLEARED})
    def destroy(self, request: Request, pk: str | None = None) -> Response:
        """Clear this pin."""
        pin = self.get_object()
        count = affinity_pins_clear(pins=[(pin.provider_id, pin.key_hash)])
        return Response({"cleared": count})

    @extend_schema(request=PinClearSerializer, responses={200: CLEARED})
    @action(detail=False, methods=["post"])
    def clear(self, request: Request) -> Response:
        """Clear the pins named by ``ids`` (unknown ids are skipped)."""
        data = PinClearSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        chosen = SessionAffinityPin.objects.filter(pk__in=data.validated_data["ids"])
        count = affinity_pins_clear(pins=chosen.values_list("provider_id", "key_hash"))
        return Response({"cleared": count})

    @extend_schema(request=None, responses={200: CLEARED})
    @action(detail=False, methods=["post"], url_path="clear-all")
    def clear_all(self, request: Request) -> Response:
        """Clear every pin, live and durable."""
        return Response({"cleared": affinity_pins_clear_all()}, status=status.HTTP_200_OK)
