"""Shared admin pieces (resilience and routing admins): the service-calling base class and small
form helpers."""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils import timezone
from django.utils.dateformat import format as date_format
from django.utils.html import format_html
from django.utils.safestring import SafeString

from omniroute.core.bounds import has_lone_surrogate
from omniroute.core.listing import MAX_SEARCH_CHARS

if TYPE_CHECKING:  # generic in django-stubs, not subscriptable at runtime
    ModelAdminBase = admin.ModelAdmin[Any]
    ModelFormBase = forms.ModelForm[Any]
    TabularInlineBase = admin.TabularInline[Any, Any]
else:
    ModelAdminBase, ModelFormBase, TabularInlineBase = (
        admin.ModelAdmin,
        forms.ModelForm,
        admin.TabularInline,
    )


class LinesField(forms.CharField):
    """A list of strings edited as text: one per line, or comma-separated."""

    widget = forms.Textarea(attrs={"rows": 3})

    def prepare_value(self, value: Any) -> Any:
        return "\n".join(value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        text = super().to_python(value) or ""
        return [item.strip() for item in re.split(r"[,\n]", text) if item.strip()]


def human_seconds(seconds: int) -> str:
    """A duration to the second for operators: "42 s", "12 min 5 s", "3 h 5 min 7 s", or "—"
    for none (zero parts are left out: "10 min")."""
    if seconds <= 0:
        return "—"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = ((hours, "h"), (minutes, "min"), (secs, "s"))
    return " ".join(f"{value} {unit}" for value, unit in parts if value)


class Tone:
    """The colour of a state badge (the styles are in templates/admin/base_site.html)."""

    OK = "ok"  # serving
    WARN = "warn"  # held back for a while, comes back on its own
    BAD = "bad"  # out until an operator acts, or open
    QUIET = "quiet"  # over, or nothing to say


def state_badge(text: str, tone: str, detail: str = "") -> SafeString:
    """A state at a glance for a change list: ``text`` on a badge coloured by ``tone``, with
    ``detail`` shown on hover (the change page has the full story)."""
    if detail:
        return format_html(
            '<span class="state-badge state-badge--{}" title="{}">{}</span>', tone, detail, text
        )
    return format_html('<span class="state-badge state-badge--{}">{}</span>', tone, text)


SECONDS_PER_DAY = 86_400


def human_duration(delta: timedelta) -> str:
    """A time left for operators: whole days from two days up ("30 d"), else to the second
    ("1 h 5 min 3 s")."""
    seconds = math.ceil(delta.total_seconds())
    if seconds >= 2 * SECONDS_PER_DAY:
        return f"{seconds // SECONDS_PER_DAY} d"
    return human_seconds(seconds)


MOMENT_FORMAT = "Y-m-d H:i:s"  # admin times are shown to the second, in the current time zone


def moment(value: datetime | None) -> str:
    """``value`` to the second in the current time zone ("2026-01-31 14:05:09"), or "—"."""
    if value is None:
        return "—"
    return date_format(timezone.localtime(value), MOMENT_FORMAT)


def formfield(db_field: models.Field[Any, Any], **kwargs: Any) -> forms.Field | None:
    """Model form fields with URLs assumed https (Django 6's default, without the warning)."""
    if isinstance(db_field, models.URLField):
        kwargs.setdefault("assume_scheme", "https")
    return db_field.formfield(**kwargs)


class JsonTextField(forms.JSONField):
    """A JSON form field that refuses a lone surrogate (the ``"\\ud800"`` escape) and shows
    one escaped: a form shown again with its errors repeats the value, and a page holding a lone
    surrogate cannot be encoded (a 500, where the operator should read the field's error)."""

    def to_python(self, value: Any) -> Any:
        converted = super().to_python(value)
        if has_lone_surrogate(converted):
            raise ValidationError("Holds a lone surrogate (U+D800-U+DFFF), which is no text.")
        return converted

    def prepare_value(self, value: Any) -> Any:
        shown = super().prepare_value(value)
        if isinstance(shown, str):  # JSON's own escape for what UTF-8 cannot carry
            return shown.encode("utf-8", "backslashreplace").decode("utf-8")
        return shown


# The ids a database's integer key can hold: a larger one is refused by SQLite's driver and by
# PostgreSQL, each with an error of its own (a 500).
_KEY_RANGE = range(-(2**63), 2**63)


def _is_selectable(model_admin: admin.ModelAdmin[Any], value: str) -> bool:
    """Whether ``value``, one id of an action's selection, can name a row of the model."""
    key = model_admin.model._meta.pk
    assert key is not None
    if "\x00" in value:  # no text column holds it, and PostgreSQL refuses it in a query
        return False
    try:
        converted = key.to_python(value)
    except ValidationError:
        return False
    return not isinstance(converted, int) or converted in _KEY_RANGE


class BoundedAdmin(ModelAdminBase):
    """Every project admin's base, for what a forged form can send.

    - A search of over ``MAX_SEARCH_CHARS`` characters finds nothing and says why, where SQLite
      refused it as a LIKE pattern too complex (a 500).
    - An action's selection holding an id that is no id of the model (a word, a NUL, a number
      past 64 bits) changes nothing and says why, where the lookup raised (a 500).
    """

    def response_action(self, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse | None:
        selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        if not all(_is_selectable(self, value) for value in selected):
            message = "The selection holds an id that names no item. No items have been changed."
            self.message_user(request, message, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())
        return super().response_action(request, queryset)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        if len(search_term) > MAX_SEARCH_CHARS:
            message = f"A search is at most {MAX_SEARCH_CHARS} characters."
            self.message_user(request, message, messages.ERROR)
            return queryset.none(), False
        return super().get_search_results(request, queryset, search_term)


class ServiceAdmin(BoundedAdmin):
    """Base admin: a service's ValidationError rolls the save back and is reported, not a 500."""

    formfield_overrides = {
        models.URLField: {"assume_scheme": "https"},
        models.JSONField: {"form_class": JsonTextField},
    }

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        # The form already ran the model's full_clean, so this is the last resort: the whole
        # change (Django wraps it in one transaction) is rolled back and the reason shown.
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except ValidationError as exc:
            self.message_user(request, "; ".join(exc.messages), messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())


class BoundedUserAdmin(BoundedAdmin, UserAdmin):
    """Django's user admin with the project admins' bounds."""


class BoundedGroupAdmin(BoundedAdmin, GroupAdmin):
    """Django's group admin with the project admins' bounds."""


def bound_stock_admins(site: admin.AdminSite) -> None:
    """Give the user and group admins Django registers the project admins' bounds (before the
    site's URLs are built)."""
    for model, bounded in ((User, BoundedUserAdmin), (Group, BoundedGroupAdmin)):
        if site.is_registered(model):
            site.unregister(model)
        site.register(model, bounded)
