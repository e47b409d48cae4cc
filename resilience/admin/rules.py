"""Admin of provider error rules and status restatement rules.

Operator rules are added, edited and deleted here through ``resilience.services.rules``.
Built-in rows (the seeded catalog) show every field read-only but ``is_enabled``, and cannot be
deleted: the enable/disable actions are how an operator turns one off.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import flatten
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.text import Truncator

from omniroute.core.admin import (
    LinesField,
    ModelFormBase,
    ServiceAdmin,
    Tone,
    human_seconds,
    state_badge,
)
from resilience.models.rules import ProviderErrorRule, StatusRestatementRule
from resilience.services.rules import (
    error_rule_delete,
    error_rule_save,
    restatement_rule_delete,
    restatement_rule_save,
    rule_set_enabled,
)

RuleRow = ProviderErrorRule | StatusRestatementRule
# The list shortens long texts (the change page shows them whole).
MATCH_SHOWN_CHARS = 60
MARKERS_SHOWN_CHARS = 90


class StatusListField(LinesField):
    """A list of HTTP statuses edited as text: one per line, or comma-separated."""

    def prepare_value(self, value: Any) -> Any:
        return ", ".join(str(s) for s in value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> list[int]:  # type: ignore[override]
        items = super().to_python(value)
        if not all(item.isdigit() for item in items):
            raise forms.ValidationError("Whole numbers only, e.g. 403, 400.")
        return [int(item) for item in items]


class StatusRestatementRuleForm(ModelFormBase):
    """Statuses and markers as text (one per line, or comma-separated)."""

    from_statuses = StatusListField(help_text="e.g. 403, 400")
    text_markers = LinesField(help_text="One per line; any of them must be present.")
    exclude_markers = LinesField(required=False, help_text="One per line; none may be present.")

    class Meta:
        model = StatusRestatementRule
        fields = "__all__"


class _RuleAdmin(ServiceAdmin):
    """Shared by both kinds: built-in rows frozen but for ``is_enabled``; enable/disable."""

    list_display_links = ("rule_id",)
    actions = ("enable_rules", "disable_rules")

    def get_readonly_fields(self, request: HttpRequest, obj: RuleRow | None = None) -> Any:
        if obj is not None and obj.is_builtin:
            return tuple(name for name in flatten(self.fields or ()) if name != "is_enabled")
        return ("is_builtin",)

    def get_form(
        self, request: HttpRequest, obj: RuleRow | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        if obj is not None and obj.is_builtin:  # no declared fields: only is_enabled is a field
            kwargs["form"] = ModelFormBase
        return super().get_form(request, obj, change, **kwargs)

    def has_delete_permission(self, request: HttpRequest, obj: RuleRow | None = None) -> bool:
        if obj is not None and obj.is_builtin:
            return False
        return super().has_delete_permission(request, obj)

    @admin.display(description="origin", ordering="is_enabled")
    def origin(self, obj: RuleRow) -> str:
        """Built-in or the operator's, and whether it is on."""
        kind = "built-in" if obj.is_builtin else "operator"
        if obj.is_enabled:
            return state_badge(f"{kind}, on", Tone.OK)
        return state_badge(f"{kind}, off", Tone.QUIET)

    @admin.action(description="Enable selected rules", permissions=["change"])
    def enable_rules(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._set_enabled(request, queryset, enabled=True)

    @admin.action(description="Disable selected rules", permissions=["change"])
    def disable_rules(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._set_enabled(request, queryset, enabled=False)

    def _set_enabled(self, request: HttpRequest, queryset: QuerySet[Any], *, enabled: bool) -> None:
        rules = list(queryset)
        for rule in rules:
            rule_set_enabled(rule=rule, enabled=enabled)
        verb = "Enabled" if enabled else "Disabled"
        self.message_user(request, f"{verb} {len(rules)} rule(s).", messages.SUCCESS)


@admin.register(ProviderErrorRule)
class ProviderErrorRuleAdmin(_RuleAdmin):
    """Provider error rules: operator rules are tried before the built-in catalog."""

    # What it matches, what it does, and whether it is on: fits a 1 280-pixel screen.
    list_display = ("rule_id", "provider", "matches", "effect", "cooldown", "origin")
    list_filter = ("provider", "is_builtin", "is_enabled", "scope", "reason")
    search_fields = ("provider", "rule_id", "match", "header_name")
    fields = (
        "provider",
        "rule_id",
        "position",
        "is_enabled",
        "is_builtin",
        "status",
        "match",
        "header_name",
        "header_match",
        "header_value",
        "scope",
        "reason",
        "cooldown_ms",
        "parse_reset_countdown",
    )

    @admin.display(description="header")
    def header(self, obj: ProviderErrorRule) -> str:
        if not obj.header_name:
            return "—"
        operator = "contains" if obj.header_match == "contains" else "="
        return f"{obj.header_name} {operator} {obj.header_value!r}"

    @admin.display(description="matches", ordering="status")
    def matches(self, obj: ProviderErrorRule) -> str:
        """Status, body text (shortened) and header, e.g. 429 · body “quota” · x-h = '0'."""
        parts = [str(obj.status) if obj.status else "any status"]
        if obj.match:
            parts.append(f"body “{Truncator(obj.match).chars(MATCH_SHOWN_CHARS)}”")
        if obj.header_name:
            parts.append(self.header(obj))
        return " · ".join(parts)

    @admin.display(description="effect", ordering="reason")
    def effect(self, obj: ProviderErrorRule) -> str:
        return f"{obj.reason} on the {obj.scope}"

    @admin.display(description="cooldown", ordering="cooldown_ms")
    def cooldown(self, obj: ProviderErrorRule) -> str:
        if obj.parse_reset_countdown:
            return "from body countdown"
        return human_seconds((obj.cooldown_ms or 0) // 1000)

    def save_model(
        self, request: HttpRequest, obj: ProviderErrorRule, form: Any, change: bool
    ) -> None:
        error_rule_save(rule=obj)

    def delete_model(self, request: HttpRequest, obj: ProviderErrorRule) -> None:
        error_rule_delete(rule=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[ProviderErrorRule]) -> None:
        for rule in queryset:
            error_rule_delete(rule=rule)


@admin.register(StatusRestatementRule)
class StatusRestatementRuleAdmin(_RuleAdmin):
    """Status restatement rules: a misstated upstream status becomes the real one."""

    form = StatusRestatementRuleForm
    list_display = (
        "rule_id",
        "provider",
        "statuses",
        "to_status",
        "markers",
        "retry_after",
        "origin",
    )
    list_filter = ("provider", "is_builtin", "is_enabled")
    search_fields = ("provider", "rule_id")
    fields = (
        "provider",
        "rule_id",
        "position",
        "is_enabled",
        "is_builtin",
        "from_statuses",
        "to_status",
        "text_markers",
        "exclude_markers",
        "default_retry_after_ms",
    )

    @admin.display(description="from statuses")
    def statuses(self, obj: StatusRestatementRule) -> str:
        return ", ".join(str(s) for s in obj.from_statuses or ())

    @admin.display(description="markers (not)")
    def markers(self, obj: StatusRestatementRule) -> str:
        shown = ", ".join(obj.text_markers or ())
        excluded = ", ".join(obj.exclude_markers or ())
        text = f"{shown} (not {excluded})" if excluded else shown
        return Truncator(text).chars(MARKERS_SHOWN_CHARS)

    @admin.display(description="default retry-after", ordering="default_retry_after_ms")
    def retry_after(self, obj: StatusRestatementRule) -> str:
        return human_seconds(obj.default_retry_after_ms // 1000)

    def save_model(
        self, request: HttpRequest, obj: StatusRestatementRule, form: Any, change: bool
    ) -> None:
        restatement_rule_save(rule=obj)

    def delete_model(self, request: HttpRequest, obj: StatusRestatementRule) -> None:
        restatement_rule_delete(rule=obj)

    def delete_queryset(
        self, request: HttpRequest, queryset: QuerySet[StatusRestatementRule]
    ) -> None:
        for rule in queryset:
            restatement_rule_delete(rule=rule)
