"""The "Model cooldowns" page: the active model lockouts, with unlock buttons.

The locks live in the state store, not in the database, so the page is a template over
``lockouts_active()`` registered through the table-less ``ModelCooldown``; its two URLs replace
the usual add/change/delete ones. Seeing the page takes ``view_modelcooldown`` (or change);
unlocking, a CSRF-protected POST, takes ``change_modelcooldown``.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from omniroute.core.admin import BoundedAdmin, human_seconds
from resilience.models import ModelCooldown
from resilience.services.lockout_operations import (
    LabelledLock,
    lockouts_active,
    lockouts_clear,
    lockouts_unlock,
)

TEMPLATE = "admin/resilience/model_cooldowns.html"
COLUMNS = (  # (class suffix, heading) of the table's columns, in order
    ("provider", "Provider"),
    ("connection", "Connection"),
    ("model", "Model"),
    ("reason", "Reason"),
    ("timer", "Timer"),
    ("failures", "Failures"),
    ("expires", "Expires"),
    ("remaining", "Remaining"),
)


@dataclass(frozen=True, slots=True)
class CooldownRow:
    """One table row."""

    provider: str
    connection_id: int
    connection: str
    model: str
    exact: bool
    reason: str
    timer: str
    failure_count: int
    expires_at: dt.datetime
    remaining: str


def _row(labelled: LabelledLock) -> CooldownRow:
    lock = labelled.lock
    return CooldownRow(
        provider=lock.provider,
        connection_id=lock.connection_id,
        connection=labelled.account_label,
        model=lock.model,
        exact=lock.exact,
        reason=lock.reason,
        timer=lock.timer or "unknown",
        failure_count=lock.failure_count,
        expires_at=dt.datetime.fromtimestamp(lock.until, dt.UTC),
        remaining=human_seconds(math.ceil(lock.remaining_ms / 1000)),
    )


class UnlockForm(forms.Form):
    """One model on one connection (or, without a connection, on all of the provider's)."""

    provider = forms.CharField()
    model = forms.CharField()
    connection_id = forms.IntegerField(required=False)


@admin.register(ModelCooldown)
class ModelCooldownAdmin(BoundedAdmin):
    """Read-only list of the live model lockouts; operators act through unlock."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        name = f"{self.opts.app_label}_{self.opts.model_name}"
        wrap = self.admin_site.admin_view  # staff only, CSRF-protected
        return [
            path("", wrap(self.changelist_view), name=f"{name}_changelist"),
            path("unlock/", wrap(self.unlock_view), name=f"{name}_unlock"),
        ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Model cooldowns",
            "rows": [_row(labelled) for labelled in lockouts_active()],
            "columns": COLUMNS,
            "can_unlock": self.has_change_permission(request),
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, TEMPLATE, context)

    def unlock_view(self, request: HttpRequest) -> HttpResponse:
        """POST ``all`` to clear every lock, or ``provider``, ``model``, ``connection_id``."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_change_permission(request):
            raise PermissionDenied
        if request.POST.get("all"):
            lockouts_clear()
            self.message_user(request, "Removed every model lock.", messages.SUCCESS)
        else:
            self._unlock_one(request, UnlockForm(request.POST))
        return HttpResponseRedirect(reverse("admin:resilience_modelcooldown_changelist"))

    def _unlock_one(self, request: HttpRequest, form: UnlockForm) -> None:
        if not form.is_valid():
            message = "Nothing unlocked: provider and model are required."
            self.message_user(request, message, messages.ERROR)
            return
        provider, model, connection = (
            form.cleaned_data[name] for name in ("provider", "model", "connection_id")
        )
        removed = lockouts_unlock(provider=provider, model=model, connection_id=connection)
        where = "every connection" if connection is None else f"connection {connection}"
        message = f"Unlocked {model} ({provider}, {where}): {removed} lock(s) removed."
        self.message_user(request, message, messages.SUCCESS)
