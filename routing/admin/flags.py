"""Admin of the feature flags (runtime overrides of environment settings)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from omniroute.core.admin import ServiceAdmin
from routing.models import FeatureFlag
from routing.services import feature_flag_delete, feature_flag_save


@admin.register(FeatureFlag)
class FeatureFlagAdmin(ServiceAdmin):
    """Overrides that take effect at the next request, without a restart."""

    list_display = ("name", "enabled", "value", "environment", "updated_at")
    readonly_fields = ("environment", "updated_at")
    fields = ("name", "enabled", "value", "environment", "updated_at")

    @admin.display(description="environment's setting")
    def environment(self, obj: FeatureFlag) -> str:
        if obj.name == FeatureFlag.Name.EMERGENCY_FALLBACK:
            return settings.EMERGENCY_FALLBACK or "—"
        return "—"

    def save_model(self, request: HttpRequest, obj: FeatureFlag, form: Any, change: bool) -> None:
        feature_flag_save(flag=obj)

    def delete_model(self, request: HttpRequest, obj: FeatureFlag) -> None:
        feature_flag_delete(flag=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[FeatureFlag]) -> None:
        for flag in queryset:
            feature_flag_delete(flag=flag)
