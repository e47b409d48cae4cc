"""Admin of the provider catalog."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from omniroute.core.admin import ServiceAdmin
from routing.models import Provider
from routing.services import provider_delete, provider_save

QUIRKS = (
    ("full_text_rules", "full-text rules"),
    ("honors_rule_scope", "honors rule scope"),
    ("egress_bucketed_lock", "bucketed egress lock"),
    ("per_model_quota", "per-model quota"),
)


@admin.register(Provider)
class ProviderAdmin(ServiceAdmin):
    """The provider catalog; its quirks are the four flags."""

    # The four quirk flags in one column: the list fits a 1 280-pixel screen.
    list_display = ("slug", "name", "category", "wire_format", "quirks", "max_concurrent")
    list_filter = (
        "category",
        "wire_format",
        "full_text_rules",
        "honors_rule_scope",
        "egress_bucketed_lock",
        "per_model_quota",
    )
    search_fields = ("slug", "name", "base_url")

    @admin.display(description="quirks")
    def quirks(self, obj: Provider) -> str:
        """The flags that are on, in words ("—" for none)."""
        return ", ".join(label for flag, label in QUIRKS if getattr(obj, flag)) or "—"

    def get_readonly_fields(self, request: HttpRequest, obj: Provider | None = None) -> Any:
        """The slug is the primary key: editable only when adding."""
        return ("slug", "updated_at") if obj is not None else ("updated_at",)

    def save_model(self, request: HttpRequest, obj: Provider, form: Any, change: bool) -> None:
        provider_save(provider=obj)

    def delete_model(self, request: HttpRequest, obj: Provider) -> None:
        provider_delete(provider=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Provider]) -> None:
        for provider in queryset:
            provider_delete(provider=provider)
