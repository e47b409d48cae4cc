"""Management API serializers. They validate and present; the views hand data to services.

None of them is ever ``save()``d: the viewsets pass ``validated_data`` to ``routing.services``.
Secrets are write-only, and a client key's plaintext only appears in the create response.
A connection's state fields show its live state (the state store's record, else the row's).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from django.db.models import Manager
from django.utils import timezone
from rest_framework import serializers

from omniroute.core.fields import RelatedListField
from resilience.domain.connection_state import ConnectionState
from routing.crypto import mask_url_credentials
from routing.domain.config.timing import cooldown_remaining_seconds
from routing.domain.config.vocabulary import Scope
from routing.models import (
    ClientApiKey,
    Combo,
    ComboTarget,
    ModelCatalogEntry,
    Provider,
    ProviderConnection,
)
from routing.selectors import (
    connection_state_columns,
    connection_state_live,
    connection_states_live,
)
from routing.services.connections import ERROR_FIELDS, EXPIRED_RETRY_FIELDS, SETTINGS_FIELDS


def _secret_field() -> serializers.CharField:
    # allow_null: null, like omitting the field, keeps the stored secret; "" clears it.
    return serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        allow_null=True,
        trim_whitespace=False,
        style={"input_type": "password"},
    )


class ProviderSerializer(serializers.ModelSerializer[Provider]):
    """A catalog provider; the slug is its identity and cannot change once created."""

    class Meta:
        model = Provider
        fields = (
            "slug",
            "name",
            "category",
            "base_url",
            "wire_format",
            "full_text_rules",
            "honors_rule_scope",
            "egress_bucketed_lock",
            "per_model_quota",
            "max_concurrent",
            "updated_at",
        )
        read_only_fields = ("updated_at",)

    def validate_slug(self, value: str) -> str:
        if self.instance is not None and value != self.instance.slug:
            raise serializers.ValidationError("The slug of an existing provider cannot change.")
        return value


class ProviderConnectionListSerializer(serializers.ListSerializer[ProviderConnection]):
    """Many connections at once: their live states are read from the store together."""

    def to_representation(  # type: ignore[override]  # as in the stubs: a list, not one
        self, data: Manager[Any] | Iterable[Any]
    ) -> list[Any]:
        connections = list(data.all() if isinstance(data, Manager) else data)
        states = connection_states_live(connections)
        child = self.child
        assert isinstance(child, ProviderConnectionSerializer)
        return [child.represent(c, states[c.pk]) for c in connections]


class ProviderConnectionSerializer(serializers.ModelSerializer[ProviderConnection]):
    """A connection; ``secret``/``refresh_secret`` are write-only (omitted keeps, "" clears).

    The state fields (``ERROR_FIELDS``, ``cooldown_remaining_seconds``) show the live state:
    the row is only its durable copy and may lag behind the state store.
    """

    secret = _secret_field()
    refresh_secret = _secret_field()
    has_secret = serializers.BooleanField(read_only=True)
    secret_preview = serializers.CharField(source="masked_secret", read_only=True)
    cooldown_remaining_seconds = serializers.SerializerMethodField()
    served_models = serializers.ListField(
        child=serializers.CharField(max_length=200), required=False
    )
    extras = serializers.DictField(required=False)
    rate_limit_overrides = serializers.DictField(required=False)

    class Meta:
        model = ProviderConnection
        fields = (
            "id",
            *SETTINGS_FIELDS,
            "secret",
            "refresh_secret",
            "has_secret",
            "secret_preview",
            "cooldown_remaining_seconds",
            *ERROR_FIELDS,
            *EXPIRED_RETRY_FIELDS,
            "created_at",
            "updated_at",
        )
        # State changes only through the services (clear_error, reset_terminal).
        read_only_fields = (*ERROR_FIELDS, *EXPIRED_RETRY_FIELDS, "created_at", "updated_at")
        extra_kwargs = {"provider": {"help_text": "The provider's slug."}}
        list_serializer_class = ProviderConnectionListSerializer

    def get_cooldown_remaining_seconds(self, obj: ProviderConnection) -> int:
        return cooldown_remaining_seconds(obj.rate_limited_until, timezone.now())

    def validate_proxy_url(self, value: str) -> str:
        stored = self.instance.proxy_url if isinstance(self.instance, ProviderConnection) else ""
        return stored if stored and value == mask_url_credentials(stored) else value

    def to_representation(self, instance: ProviderConnection) -> dict[str, Any]:
        return self.represent(instance, connection_state_live(instance))

    def represent(self, instance: ProviderConnection, state: ConnectionState) -> dict[str, Any]:
        """``instance`` with ``state`` in place of the row's state columns."""
        shown = copy.copy(instance)  # only read for the representation, never saved
        for name, value in connection_state_columns(state).items():
            setattr(shown, name, value)
        data = super().to_representation(shown)
        if data.get("proxy_url"):  # a proxy password is a secret too
            data["proxy_url"] = mask_url_credentials(data["proxy_url"])
        return data


class ClientApiKeySerializer(serializers.ModelSerializer[ClientApiKey]):
    """A client key as operators see it: never the plaintext, never the hash."""

    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=[s.value for s in Scope]), required=False
    )
    allowed_models = serializers.ListField(
        child=serializers.CharField(max_length=200), required=False
    )
    allowed_connections = RelatedListField(
        child_relation=serializers.PrimaryKeyRelatedField(
            queryset=ProviderConnection.objects.all()
        ),
        required=False,
    )

    class Meta:
        model = ClientApiKey
        fields: tuple[str, ...] = (
            "id",
            "name",
            "prefix",
            "scopes",
            "allowed_models",
            "allowed_connections",
            "is_active",
            "expires_at",
            "revoked_at",
            "created_at",
        )
        read_only_fields = ("prefix", "revoked_at", "created_at")


class ClientApiKeyCreatedSerializer(ClientApiKeySerializer):
    """Output of key creation: the key plus its plaintext (from the context), shown this once."""

    key = serializers.SerializerMethodField(help_text="The plaintext key; never shown again.")

    class Meta(ClientApiKeySerializer.Meta):
        fields = (*ClientApiKeySerializer.Meta.fields, "key")

    def get_key(self, obj: ClientApiKey) -> str:
        return str(self.context["plaintext"])


class ComboTargetSerializer(serializers.ModelSerializer[ComboTarget]):
    """One step of a combo; its position is its index in ``targets``. A step names a provider
    and model (a model with ``*`` or ``?`` is a pattern), or a nested combo by name
    (``combo_ref``)."""

    provider = serializers.PrimaryKeyRelatedField(
        queryset=Provider.objects.all(), allow_null=True, required=False
    )
    model = serializers.CharField(max_length=200, allow_blank=True, required=False)
    combo_ref = serializers.SlugRelatedField(
        slug_field="name",
        queryset=Combo.objects.all(),
        allow_null=True,
        required=False,
        help_text="A nested combo's name, instead of provider and model.",
    )
    connection = serializers.PrimaryKeyRelatedField(
        queryset=ProviderConnection.objects.all(), allow_null=True, required=False
    )

    class Meta:
        model = ComboTarget
        fields = (
            "position",
            "provider",
            "model",
            "combo_ref",
            "connection",
            "weight",
            "fallback_only_on_quota_exhaustion",
        )
        read_only_fields = ("position",)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Exactly one of a provider (with its model) and a nested combo: a partial update
        still replaces the targets whole, so each target must be complete."""
        provider, nested = attrs.get("provider"), attrs.get("combo_ref")
        connection, model = attrs.get("connection"), attrs.get("model", "")
        if nested is not None:
            if provider is not None or model or connection is not None:
                raise serializers.ValidationError(
                    {
                        "combo_ref": "A nested combo stands alone: leave provider, model and "
                        "connection empty."
                    }
                )
            return attrs
        if provider is None:
            raise serializers.ValidationError(
                {"provider": "Each target needs its provider (or a nested combo, combo_ref)."}
            )
        if not model:
            raise serializers.ValidationError({"model": "A provider's target needs its model."})
        if connection is not None and connection.provider_id != provider.pk:
            raise serializers.ValidationError(
                {"connection": "The pinned connection belongs to another provider."}
            )
        return attrs


class ComboSerializer(serializers.ModelSerializer[Combo]):
    """A combo with its ordered targets, written in one request (``targets`` replaces all).

    ``attempt_overrides`` holds keys of the ``attempts`` settings (camelCase, as in
    ``/api/resilience``) for this combo only; ``options`` the keys of its strategy (e.g.
    ``stickyRoundRobinLimit``); the model's ``clean()`` checks both.
    """

    targets = ComboTargetSerializer(many=True, required=False)

    class Meta:
        model = Combo
        fields = (
            "id",
            "name",
            "strategy",
            "is_active",
            "description",
            "attempt_overrides",
            "options",
            "targets",
            "updated_at",
        )
        read_only_fields = ("updated_at",)


class ModelCatalogEntrySerializer(serializers.ModelSerializer[ModelCatalogEntry]):
    """One model at one provider (unique per provider and model); prices are decimal strings in
    USD per million tokens, empty values mean unknown (or: follow the global settings)."""

    class Meta:
        model = ModelCatalogEntry
        fields = (
            "id",
            "provider",
            "model",
            "context_window",
            "supports_tools",
            "supports_structured_output",
            "accepts_prefill",
            "time_to_first_token_ms",
            "stream_idle_ms",
            "hedge_after_ms",
            "input_price_per_mtok",
            "output_price_per_mtok",
            "updated_at",
        )
        read_only_fields = ("updated_at",)
        extra_kwargs = {"provider": {"help_text": "The provider's slug."}}
