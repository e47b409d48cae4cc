"""Admin of the model catalog."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from resilience.admin._base import ServiceAdmin
from routing.models import ModelCatalogEntry
from routing.services import catalog_entry_delete, catalog_entry_save


@admin.register(ModelCatalogEntry)
class ModelCatalogEntryAdmin(ServiceAdmin):
    """Per provider and model: context window, capabilities, prefill support, time limits and
    prices."""

    list_display = (
        "provider",
        "model",
        "accepts_prefill",
        "context_window",
        "supports_tools",
        "supports_structured_output",
        "time_to_first_token_ms",
        "stream_idle_ms",
        "hedge_after_ms",
        "input_price_per_mtok",
        "output_price_per_mtok",
        "updated_at",
    )
    list_filter = ("provider", "accepts_prefill", "supports_tools", "supports_structured_output")
    list_select_related = ("provider",)
    search_fields = ("model", "provider__slug", "provider__name")
    readonly_fields = ("updated_at",)

    def save_model(
        self, request: HttpRequest, obj: ModelCatalogEntry, form: Any, change: bool
    ) -> None:
        catalog_entry_save(entry=obj)

    def delete_model(self, request: HttpRequest, obj: ModelCatalogEntry) -> None:
        catalog_entry_delete(entry=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[ModelCatalogEntry]) -> None:
        for entry in queryset:
            catalog_entry_delete(entry=entry)
