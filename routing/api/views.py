"""Management API viewsets: CRUD over the routing configuration, verbs as ``@action``.

Every write calls ``routing.services`` with the serializer's ``validated_data``; serializers
are never ``save()``d. Auth, permission and the error shape are the DRF defaults in settings.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import exceptions, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from omniroute.core.listing import ConfigListMixin
from routing.api.serializers import (
    ClientApiKeyCreatedSerializer,
    ClientApiKeySerializer,
    ComboSerializer,
    ModelCatalogEntrySerializer,
    ProviderConnectionSerializer,
    ProviderSerializer,
)
from routing.models import ClientApiKey, Combo, ModelCatalogEntry, Provider, ProviderConnection
from routing.selectors import LIVE_STATES, connection_state_live, connections_in_live_state
from routing.services import (
    api_key_create,
    api_key_delete,
    api_key_revoke,
    api_key_update,
    catalog_entry_delete,
    catalog_entry_save,
    combo_delete,
    combo_save,
    connection_clear_error,
    connection_delete,
    connection_reset_terminal,
    connection_save,
    provider_delete,
    provider_save,
)


class ProviderViewSet(ConfigListMixin, viewsets.ModelViewSet[Provider]):
    """Catalog providers, looked up by ``slug``; deleting one still in use gives 409."""

    queryset = Provider.objects.order_by("slug")
    serializer_class = ProviderSerializer
    lookup_field = "slug"
    filter_fields = {
        name: name
        for name in (
            "category",
            "wire_format",
            "full_text_rules",
            "honors_rule_scope",
            "egress_bucketed_lock",
            "per_model_quota",
        )
    }
    search_fields = ("slug", "name", "base_url")

    def perform_create(self, serializer: BaseSerializer[Provider]) -> None:
        serializer.instance = provider_save(provider=Provider(), fields=serializer.validated_data)

    def perform_update(self, serializer: BaseSerializer[Provider]) -> None:
        assert serializer.instance is not None
        provider_save(provider=serializer.instance, fields=serializer.validated_data)

    def perform_destroy(self, instance: Provider) -> None:
        provider_delete(provider=instance)


class NotTerminal(exceptions.APIException):
    """A terminal-state reset of a connection that is not terminal."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The connection is not in a terminal state."
    default_code = "conflict"


def _connection_write(connection: ProviderConnection, data: dict[str, Any]) -> ProviderConnection:
    fields = dict(data)
    secret = fields.pop("secret", None)
    refresh_secret = fields.pop("refresh_secret", None)
    return connection_save(
        connection=connection, fields=fields, secret=secret, refresh_secret=refresh_secret
    )


@extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter(
                "state", str, enum=LIVE_STATES, description="Only connections in this live state."
            )
        ]
    )
)
class ProviderConnectionViewSet(ConfigListMixin, viewsets.ModelViewSet[ProviderConnection]):
    """Provider connections; secrets are write-only and never echoed."""

    queryset = ProviderConnection.objects.select_related("provider").order_by(
        "provider_id", "priority", "id"
    )
    serializer_class = ProviderConnectionSerializer
    filter_fields = {
        "provider": "provider",
        "test_status": "test_status",
        "is_active": "is_active",
        "auth_type": "auth_type",
    }
    search_fields = ("name", "provider__slug", "provider__name")

    def get_queryset(self) -> QuerySet[ProviderConnection]:
        queryset = super().get_queryset()
        state = self.request.query_params.get("state") if self.action == "list" else None
        if not state:
            return queryset
        try:
            return connections_in_live_state(queryset, state)
        except ValueError:
            raise exceptions.ValidationError(
                {"state": f"One of {', '.join(LIVE_STATES)}."}
            ) from None

    def perform_create(self, serializer: BaseSerializer[ProviderConnection]) -> None:
        serializer.instance = _connection_write(ProviderConnection(), serializer.validated_data)

    def perform_update(self, serializer: BaseSerializer[ProviderConnection]) -> None:
        assert serializer.instance is not None
        _connection_write(serializer.instance, serializer.validated_data)

    def perform_destroy(self, instance: ProviderConnection) -> None:
        connection_delete(connection=instance)

    @extend_schema(request=None, responses=ProviderConnectionSerializer)
    @action(detail=True, methods=["post"])
    def clear_error(self, request: Request, pk: str | None = None) -> Response:
        """Clear the cooldown, error fields and terminal status of a connection."""
        connection = connection_clear_error(connection=self.get_object())
        return Response(self.get_serializer(connection).data)

    @extend_schema(request=None, responses={200: ProviderConnectionSerializer, 409: None})
    @action(detail=True, methods=["post"])
    def reset_terminal(self, request: Request, pk: str | None = None) -> Response:
        """Bring a banned, expired or out-of-credits connection back to active (409 if it is
        not in a terminal state)."""
        connection = self.get_object()
        if not connection_reset_terminal(connection=connection):
            status = connection_state_live(connection).test_status
            raise NotTerminal(f"The connection is {status}, not terminal.")
        return Response(self.get_serializer(connection).data)


class ClientApiKeyViewSet(ConfigListMixin, viewsets.ModelViewSet[ClientApiKey]):
    """Client keys. Create returns the plaintext once as ``key``; nothing else ever does."""

    queryset = ClientApiKey.objects.prefetch_related("allowed_connections").order_by("name", "id")
    serializer_class = ClientApiKeySerializer
    filter_fields = {"is_active": "is_active", "revoked": "-revoked_at__isnull"}
    search_fields = ("name", "prefix")

    @extend_schema(responses={201: ClientApiKeyCreatedSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        key, plaintext = api_key_create(**serializer.validated_data)
        context = {**self.get_serializer_context(), "plaintext": plaintext}
        output = ClientApiKeyCreatedSerializer(key, context=context)
        return Response(output.data, status=status.HTTP_201_CREATED)

    def perform_update(self, serializer: BaseSerializer[ClientApiKey]) -> None:
        assert serializer.instance is not None
        fields = dict(serializer.validated_data)
        connections = fields.pop("allowed_connections", None)
        api_key_update(key=serializer.instance, fields=fields, allowed_connections=connections)

    def perform_destroy(self, instance: ClientApiKey) -> None:
        api_key_delete(key=instance)

    @extend_schema(request=None, responses=ClientApiKeySerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str | None = None) -> Response:
        """Revoke a key for good (idempotent)."""
        key = api_key_revoke(key=self.get_object(), now=timezone.now())
        return Response(self.get_serializer(key).data)


def _combo_write(combo: Combo, data: dict[str, Any]) -> Combo:
    fields = dict(data)
    targets = fields.pop("targets", None)
    return combo_save(combo=combo, fields=fields, targets=targets)


class ComboViewSet(ConfigListMixin, viewsets.ModelViewSet[Combo]):
    """Combos, looked up by numeric ``id`` (names may contain ``/``); filter with ``?name=``.

    ``targets`` is written whole: when given, it replaces the combo's targets in order.
    """

    queryset = Combo.objects.prefetch_related("targets__combo_ref").order_by("name", "id")
    serializer_class = ComboSerializer
    filter_fields = {"name": "name", "strategy": "strategy", "is_active": "is_active"}
    search_fields = ("name", "description")

    def perform_create(self, serializer: BaseSerializer[Combo]) -> None:
        serializer.instance = _combo_write(Combo(), serializer.validated_data)

    def perform_update(self, serializer: BaseSerializer[Combo]) -> None:
        assert serializer.instance is not None
        _combo_write(serializer.instance, serializer.validated_data)

    def perform_destroy(self, instance: Combo) -> None:
        combo_delete(combo=instance)


class ModelCatalogEntryViewSet(ConfigListMixin, viewsets.ModelViewSet[ModelCatalogEntry]):
    """The model catalog, by numeric ``id``; filter with ``?provider=`` and ``?model=``."""

    queryset = ModelCatalogEntry.objects.order_by("provider_id", "model", "id")
    serializer_class = ModelCatalogEntrySerializer
    filter_fields = {
        "provider": "provider",
        "model": "model",
        "accepts_prefill": "accepts_prefill",
        "supports_tools": "supports_tools",
        "supports_structured_output": "supports_structured_output",
    }
    search_fields = ("model", "provider__slug", "provider__name")

    def perform_create(self, serializer: BaseSerializer[ModelCatalogEntry]) -> None:
        serializer.instance = catalog_entry_save(
            entry=ModelCatalogEntry(), fields=serializer.validated_data
        )

    def perform_update(self, serializer: BaseSerializer[ModelCatalogEntry]) -> None:
        assert serializer.instance is not None
        catalog_entry_save(entry=serializer.instance, fields=serializer.validated_data)

    def perform_destroy(self, instance: ModelCatalogEntry) -> None:
        catalog_entry_delete(entry=instance)
