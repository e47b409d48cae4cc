"""Django admin for resilience: the settings page (one document, edited field by field).

The form has one field per row of the registered sections (``SETTINGS``), labelled in words
(``settings_text``) with the dotted path named in its help text. The page shows each section of
the document as one collapsible part (``settings_page``): closed, unless it holds a value that
differs from its default or a field with an error; each such value is marked with its default.
Only the fields the operator changed form the patch, so untouched settings keep following their
defaults and environment overrides. ``clean()`` runs the API's strict
``validate_patch`` and saving calls ``resilience_settings_update``: the same rules and the same
write path as ``PATCH /api/resilience``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html

from omniroute.core.admin import BoundedAdmin, ModelFormBase
from omniroute.core.settings import (
    ROOT_FIELD,
    SETTINGS,
    FieldSpec,
    Kind,
    SettingsError,
    flatten,
    unflatten,
)
from resilience.admin.settings_page import (
    changed_paths,
    groups,
    page_sections,
    section_of,
    settings_defaults,
    shown,
)
from resilience.admin.settings_text import group_heading, help_for, label_for
from resilience.models import ResilienceSettings
from resilience.selectors.settings import SETTINGS_PK
from resilience.services import resilience_settings_document, resilience_settings_update

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldOpts, _FieldsetSpec


def field_name(path: str) -> str:
    """The form field of a dotted settings path (dots do not belong in HTML ids)."""
    return path.replace(".", "__")


def field_path(name: str) -> str:
    """The dotted settings path of a form field."""
    return name.replace("__", ".")


def _optional_bool_widget() -> forms.NullBooleanSelect:
    widget = forms.NullBooleanSelect()
    widget.choices = [("unknown", "Unset (provider default)"), ("true", "Yes"), ("false", "No")]
    return widget


class _IntegersInput(forms.TextInput):
    """One text box of comma-separated integers; repeated keys in the POST are taken too."""

    def format_value(self, value: Any) -> str | None:
        return ", ".join(map(str, value)) if isinstance(value, list | tuple) else value

    def value_from_datadict(self, data: Any, files: Any, name: str) -> Any:
        values = data.getlist(name) if hasattr(data, "getlist") else [data.get(name)]
        return ", ".join(str(v) for v in values if v is not None)


class IntegersField(forms.Field):
    """A list of integers edited as text ("403, 429"); bounds are ``validate_patch``'s."""

    widget = _IntegersInput

    def to_python(self, value: Any) -> list[int]:
        if isinstance(value, list | tuple):
            value = ", ".join(map(str, value))
        items = [item for item in re.split(r"[,\s]+", str(value or "")) if item]
        try:
            return [int(item) for item in items]
        except ValueError:
            raise forms.ValidationError("Enter whole numbers separated by commas.") from None


def _form_field(path: str, spec: FieldSpec) -> forms.Field:
    # No min/max here: the bounds are validate_patch's to check, with the API's messages.
    label = label_for(path)
    if spec.kind is Kind.BOOL:
        return forms.BooleanField(label=label, required=False, help_text=_help(path, spec))
    if spec.kind is Kind.OPTIONAL_BOOL:
        widget = _optional_bool_widget()
        return forms.NullBooleanField(label=label, widget=widget, help_text=_help(path, spec))
    if spec.kind is Kind.INT_LIST:
        detail = "whole numbers separated by commas"
        return IntegersField(label=label, required=False, help_text=_help(path, spec, detail))
    bounds = f"from {spec.minimum:,} to {spec.maximum:,}"
    return forms.IntegerField(label=label, help_text=_help(path, spec, bounds))


def _help(path: str, spec: FieldSpec, allowed: str = "") -> str:
    """What the setting does, what it accepts, and its name in the API's JSON document."""
    text = help_for(path, spec.help)
    if allowed:
        text += f" Allowed: {allowed}."
    return f"{text} API name: {path}.".strip()


class _SettingsFormBase(ModelFormBase):
    """Initial values are the resolved document; ``patch`` holds the validated changes;
    ``changed`` the paths whose value differs from the default, each marked on the page."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.current = resilience_settings_document()
        for path, value in flatten(self.current).items():
            self.initial.setdefault(field_name(path), value)
        self.patch: dict[str, Any] = {}
        defaults = settings_defaults()
        self.changed = changed_paths(self.current, defaults)
        for path in self.changed:
            self._mark_changed(path, defaults.get(path))

    def _mark_changed(self, path: str, default: Any) -> None:
        field = self.fields[field_name(path)]
        marker = format_html(
            '<strong class="changed-from-default" data-path="{}">Changed; the default is {}.'
            "</strong> ",
            path,
            shown(default),
        )
        field.help_text = marker + field.help_text
        field.widget.attrs["class"] = "changed-from-default"

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors:  # a field that failed its own cleaning is missing from ``cleaned``
            return cleaned
        changed = {
            p: cleaned[field_name(p)]
            for p in SETTINGS.schema.fields
            if field_name(p) in self.changed_data
        }
        if not changed:
            return cleaned
        try:
            self.patch = SETTINGS.validate_patch(unflatten(changed), self.current)
        except SettingsError as exc:
            for path, message in exc.errors.items():
                self.add_error(None if path == ROOT_FIELD else field_name(path), message)
        return cleaned

    class Meta:
        model = ResilienceSettings
        fields: list[str] = []


ResilienceSettingsForm = type(
    "ResilienceSettingsForm",
    (_SettingsFormBase,),
    {field_name(path): _form_field(path, spec) for path, spec in SETTINGS.schema.fields.items()},
)


def _fieldsets() -> _FieldsetSpec:
    """One fieldset per group of the document; the template puts them in their sections."""
    return [_fieldset(group, paths) for group, paths in groups().items()]


def _fieldset(group: str, paths: list[str]) -> tuple[str | None, _FieldOpts]:
    fields = tuple(map(field_name, paths))
    if group == section_of(group):  # the section's own fields: its part carries the words
        return None, {"fields": fields}
    heading, description = group_heading(group)
    if description == group_heading(section_of(group))[1]:
        return heading, {"fields": fields}  # said once, above the section's groups
    return heading, {"fields": fields, "description": description}


@admin.register(ResilienceSettings)
class ResilienceSettingsAdmin(BoundedAdmin):
    """One page: the changelist redirects to it; nothing to add or delete."""

    form = ResilienceSettingsForm
    fieldsets = _fieldsets()
    change_form_template = "admin/resilience/resiliencesettings/change_form.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> ResilienceSettings | None:
        """The row, or an unsaved one before the first save (the service creates it)."""
        if object_id != str(SETTINGS_PK):
            return None
        return ResilienceSettings.objects.filter(pk=SETTINGS_PK).first() or ResilienceSettings(
            pk=SETTINGS_PK
        )

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        url = reverse("admin:resilience_resiliencesettings_change", args=[SETTINGS_PK])
        return HttpResponseRedirect(url)

    def render_change_form(
        self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any
    ) -> HttpResponse:
        """The page, its fieldsets gathered into the document's sections."""
        adminform = context["adminform"]
        form = adminform.form
        errors = [field_path(name) for name in form.errors if name in form.fields]
        context["settings_sections"] = page_sections(adminform, form.changed, errors)
        return super().render_change_form(request, context, *args, **kwargs)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if form.patch:
            resilience_settings_update(patch=form.patch)
