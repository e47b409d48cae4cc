"""Admin of combos: the combo and its inline targets are saved by one ``combo_save``; its
attempt overrides and strategy options are JSON objects whose errors name the key."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.widgets import RelatedFieldWidgetWrapper
from django.db.models import Count, Field, QuerySet
from django.http import HttpRequest

from omniroute.core.admin import ServiceAdmin, TabularInlineBase
from routing.domain.config.combo_options import COMMON, OPTION_SPECS, options_help
from routing.domain.settings.overrides import attempt_override_bounds, attempt_override_keys
from routing.models import Combo, ComboTarget
from routing.services import combo_delete, combo_save


class ConnectionNameField(forms.ModelChoiceField):
    """A connection chosen by its name alone (a target's provider is in its own column)."""

    def label_from_instance(self, obj: Any) -> str:
        return str(obj.name)


class ComboTargetInline(TabularInlineBase):
    """A combo's ordered targets; saved through ``combo_save`` with the combo."""

    model = ComboTarget
    fk_name = "combo"  # a target also names its nested combo (``combo_ref``)
    fields = (
        "position",
        "provider",
        "model",
        "combo_ref",
        "connection",
        "weight",
        "fallback_only_on_quota_exhaustion",
    )
    ordering = ("position", "id")
    extra = 1

    def formfield_for_dbfield(
        self, db_field: Field[Any, Any], request: HttpRequest, **kwargs: Any
    ) -> forms.Field | None:
        """Narrow rows, so the targets fit a 1 280-pixel screen: a connection is named without
        its provider (the provider column beside it says it), and the related fields keep only
        their add and change links (deleting a provider or a connection from inside a combo is
        not this form's business; viewing is what the change link does)."""
        if db_field.name == "connection":
            kwargs["form_class"] = ConnectionNameField
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if field is not None and isinstance(field.widget, RelatedFieldWidgetWrapper):
            field.widget.can_delete_related = field.widget.can_view_related = False
        return field


def _kept_targets(formset: Any) -> list[dict[str, Any]]:
    """The formset's surviving targets as ``combo_save`` dicts, ordered by position."""
    rows = [
        form.cleaned_data
        for form in formset.forms
        if form.cleaned_data and not form.cleaned_data.get("DELETE")
    ]
    rows.sort(key=lambda row: row.get("position") or 0)
    fields = (
        "provider",
        "model",
        "combo_ref",
        "connection",
        "weight",
        "fallback_only_on_quota_exhaustion",
    )
    return [{name: row[name] for name in fields if name in row} for row in rows]


def _record_changes(formset: Any) -> None:
    """Fill what ``formset.save()`` would have, for the admin's change history."""
    live = [f for f in formset.forms if f.cleaned_data and not f.cleaned_data.get("DELETE")]
    formset.new_objects = [f.instance for f in live if f.instance.pk is None]
    formset.changed_objects = [
        (f.instance, f.changed_data) for f in live if f.instance.pk and f.has_changed()
    ]
    formset.deleted_objects = [
        f.instance for f in formset.forms if f.cleaned_data.get("DELETE") and f.instance.pk
    ]


def _override_keys() -> str:
    bounds = attempt_override_bounds()
    return ", ".join(
        f"{key} ({bounds[key][0]}–{bounds[key][1]})" if key in bounds else f"{key} (true/false)"
        for key in attempt_override_keys()
    )


def _options_help(strategy: str | None) -> str:
    """The option keys of ``strategy``; of every strategy while none is chosen yet."""
    if strategy is not None:
        return f"Keys of {strategy}: {options_help(strategy)}."
    own = (
        f"{name}: {', '.join(spec.describe() for spec in specs)}"
        for name, specs in OPTION_SPECS.items()
        if name != COMMON
    )
    common = ", ".join(spec.describe() for spec in OPTION_SPECS[COMMON])
    return f"Keys of every strategy: {common}. Per strategy: {'; '.join(own)}."


@admin.register(Combo)
class ComboAdmin(ServiceAdmin):
    """Combos and their targets, written together by one ``combo_save`` call."""

    list_display = ("name", "strategy", "is_active", "target_count", "description", "updated_at")
    list_filter = ("strategy", "is_active")
    search_fields = ("name", "description")
    readonly_fields = ("updated_at",)
    inlines = (ComboTargetInline,)

    def formfield_for_dbfield(
        self, db_field: Field[Any, Any], request: HttpRequest, **kwargs: Any
    ) -> forms.Field | None:
        """The overrides' help text lists the keys with their bounds, from the settings."""
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if field is not None and db_field.name == "attempt_overrides":
            field.help_text = f"{db_field.help_text} Keys (bounds): {_override_keys()}."
        return field

    def get_form(
        self, request: HttpRequest, obj: Combo | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        """The options' help text lists the keys of the combo's strategy, with bounds."""
        form = super().get_form(request, obj, change, **kwargs)
        field = form.base_fields.get("options")
        if field is not None:  # a fresh form class per call: its fields are its own
            keys = _options_help(obj.strategy if obj is not None else None)
            field.help_text = f"{field.help_text} {keys}"
        return form

    def get_queryset(self, request: HttpRequest) -> QuerySet[Combo]:
        queryset: QuerySet[Combo] = super().get_queryset(request)
        return queryset.annotate(target_count=Count("targets"))

    @admin.display(description="Targets", ordering="target_count")
    def target_count(self, obj: Combo) -> int:
        return int(getattr(obj, "target_count", 0))

    def save_model(self, request: HttpRequest, obj: Combo, form: Any, change: bool) -> None:
        """Deferred to ``save_related``, where the targets are known: one service call."""

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        targets = [target for formset in formsets for target in _kept_targets(formset)]
        combo_save(combo=form.instance, targets=targets)
        for formset in formsets:
            _record_changes(formset)

    def delete_model(self, request: HttpRequest, obj: Combo) -> None:
        combo_delete(combo=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Combo]) -> None:
        for combo in queryset:
            combo_delete(combo=combo)
