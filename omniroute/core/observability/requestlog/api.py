"""``/api/requests/``: the request log, read-only, paged and filtered like the configuration
collections (``omniroute.core.listing``); ``/api/requests/<request_id>/`` is one request with
its decision trail. The management API's authentication and ``manage`` scope apply (the
project's default permission)."""

from __future__ import annotations

from datetime import UTC, datetime

from django.db.models import QuerySet
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import exceptions, serializers, viewsets

from omniroute.core.listing import ConfigListMixin
from omniroute.core.observability.requestlog.models import RECORDED, RequestLogEntry

TIME_BOUNDS = {"since": "started_at__gte", "until": "started_at__lt"}


class RequestLogEntrySerializer(serializers.ModelSerializer[RequestLogEntry]):
    """One finished request: key (name and prefix), model, what answered, timings, trail."""

    class Meta:
        model = RequestLogEntry
        fields = RECORDED
        read_only_fields = RECORDED


def _moment(name: str, raw: str) -> datetime:
    """``raw`` as a time with its offset that the database can compare (in UTC, years 1 to
    9999); else the 400 naming the parameter."""
    try:
        value = parse_datetime(raw)  # a well-formed but impossible date raises ValueError
        if value is not None and value.tzinfo is not None:
            return value.astimezone(UTC)  # OverflowError past the last UTC day
    except (ValueError, OverflowError):
        pass
    raise exceptions.ValidationError({name: ["An ISO 8601 time with its offset, years 1 to 9999."]})


TIME_PARAMETERS = [
    OpenApiParameter(name, OpenApiTypes.DATETIME, description=f"Requests started {word} this.")
    for name, word in (("since", "at or after"), ("until", "before"))
]


@extend_schema_view(list=extend_schema(parameters=TIME_PARAMETERS))
@extend_schema(tags=["requests"])
class RequestLogEntryViewSet(ConfigListMixin, viewsets.ReadOnlyModelViewSet[RequestLogEntry]):
    """Finished /v1 requests, newest first; filter ``?key=``, ``?model=``, ``?provider=``,
    ``?status=``, ``?since=``/``?until=``; ``?search=`` a request id."""

    queryset = RequestLogEntry.objects.order_by("-started_at", "-id")
    serializer_class = RequestLogEntrySerializer
    lookup_field = "request_id"
    lookup_value_regex = "[A-Za-z0-9_.-]+"
    filter_fields = {
        "key": "key_name",
        "model": "model",
        "provider": "provider",
        "status": "status",
    }
    search_fields = ("=request_id",)

    def get_queryset(self) -> QuerySet[RequestLogEntry]:
        queryset = super().get_queryset()
        for name, lookup in TIME_BOUNDS.items():
            raw = self.request.query_params.get(name)
            if raw:
                queryset = queryset.filter(**{lookup: _moment(name, raw)})
        return queryset
