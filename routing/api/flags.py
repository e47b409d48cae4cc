"""``/api/feature-flags/``: runtime overrides of environment settings (the emergency fallback).

Setting a flag creates or updates it, clearing deletes it (the environment's setting applies
again); both go through ``routing.services.flags``, as the admin's save and delete do.
"""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, viewsets
from rest_framework.serializers import BaseSerializer

from omniroute.core.listing import ConfigListMixin
from routing.models import FeatureFlag
from routing.services import feature_flag_delete, feature_flag_save


class FeatureFlagSerializer(serializers.ModelSerializer[FeatureFlag]):
    """One override: while ``enabled`` its ``value`` replaces the environment's setting."""

    environment = serializers.SerializerMethodField(
        help_text="What the environment sets when the flag is off or absent."
    )

    class Meta:
        model = FeatureFlag
        fields = ("name", "enabled", "value", "environment", "updated_at")
        read_only_fields = ("environment", "updated_at")

    def get_environment(self, flag: FeatureFlag) -> str | None:
        if flag.name == FeatureFlag.Name.EMERGENCY_FALLBACK:
            return str(settings.EMERGENCY_FALLBACK or "") or None
        return None


@extend_schema(tags=["feature-flags"])
class FeatureFlagViewSet(ConfigListMixin, viewsets.ModelViewSet[FeatureFlag]):
    """Feature flags by ``name``: POST sets a new one, PATCH/PUT changes it, DELETE clears it."""

    queryset = FeatureFlag.objects.order_by("name")
    serializer_class = FeatureFlagSerializer
    lookup_field = "name"
    filter_fields = {"enabled": "enabled"}
    search_fields = ("name", "value")

    def perform_create(self, serializer: BaseSerializer[FeatureFlag]) -> None:
        serializer.instance = feature_flag_save(
            flag=FeatureFlag(), fields=dict(serializer.validated_data)
        )

    def perform_update(self, serializer: BaseSerializer[FeatureFlag]) -> None:
        assert serializer.instance is not None
        feature_flag_save(flag=serializer.instance, fields=dict(serializer.validated_data))

    def perform_destroy(self, instance: FeatureFlag) -> None:
        feature_flag_delete(flag=instance)
