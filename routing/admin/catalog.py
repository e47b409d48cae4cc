"""Admin of the model catalog."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from omniroute.core.admin import ServiceAdmin
from routing.models import ModelCatalogEntry
from routing.services import catalog_entry_delete, catalog_entry_save


def _seconds(ms: int) -> str:
    return f"{ms / 1000:g} s"


def _price(value: Decimal | None) -> str:
    return "—" if value is None else f"{value.normalize():f}"


@admin.register(ModelCatalogEntry)
class ModelCatalogEntryAdmin(ServiceAdmin):
    """Per provider and model: context window, capabilities, prefill support, time limits and
    prices."""

    # Capabilities, time limits and prices one column each: the list fits a 1 280-pixel screen.
    list_display = (
        "model",
        "provider",
        "context_window",
        "capabilities",
        "time_limits",
        "prices",
        "updated_at",
    )
    list_display_links = ("model",)
    list_filter = ("provider", "accepts_prefill", "supports_tools", "supports_structured_output")
    list_select_related = ("provider",)
    search_fields = ("model", "provider__slug", "provider__name")
    readonly_fields = ("updated_at",)

    @admin.display(description="capabilities")
    def capabilities(self, obj: ModelCatalogEntry) -> str:
        """Tools, structured output and prefill, in words."""
        shown = [
            *(["tools"] if obj.supports_tools else []),
            *(["structured output"] if obj.supports_structured_output else []),
            f"prefill {obj.accepts_prefill}",
        ]
        return ", ".join(shown)

    @admin.display(description="time limits")
    def time_limits(self, obj: ModelCatalogEntry) -> str:
        """First token, stream idle and hedge-after, e.g. "first token 8 s · idle 30 s"."""
        limits = (
            ("first token", obj.time_to_first_token_ms),
            ("idle", obj.stream_idle_ms),
            ("hedge after", obj.hedge_after_ms),
        )
        shown = [f"{name} {_seconds(ms)}" for name, ms in limits if ms]
        return " · ".join(shown) or "—"

    @admin.display(description="price in / out per Mtok")
    def prices(self, obj: ModelCatalogEntry) -> str:
        if obj.input_price_per_mtok is None and obj.output_price_per_mtok is None:
            return "—"
        return f"{_price(obj.input_price_per_mtok)} / {_price(obj.output_price_per_mtok)}"

    def save_model(
        self, request: HttpRequest, obj: ModelCatalogEntry, form: Any, change: bool
    ) -> None:
        catalog_entry_save(entry=obj)

    def delete_model(self, request: HttpRequest, obj: ModelCatalogEntry) -> None:
        catalog_entry_delete(entry=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[ModelCatalogEntry]) -> None:
        for entry in queryset:
            catalog_entry_delete(entry=entry)
