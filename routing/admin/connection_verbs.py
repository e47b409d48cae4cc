"""The connection change page's buttons: clear cooldown, reset terminal state, unlock a model.

Each button is a CSRF-protected POST to a URL of the connection's admin, checked against the
change permission on that connection. Clearing and resetting run the changelist's own actions
on a one-row queryset (same services, same messages); unlocking calls the model-lockout service
for this connection only. Every view redirects back to the change page.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.urls import URLPattern, path, reverse

from omniroute.core.admin import human_seconds, moment
from resilience.services.lockout_operations import LockView, lockouts_by_connection, lockouts_unlock
from routing.models import ProviderConnection

if TYPE_CHECKING:
    from omniroute.core.admin import ModelAdminBase as _Base
else:
    _Base = object

LOCKS_ATTRIBUTE = "_live_locks"  # the connection's active model locks, kept on the instance
Action = Callable[[HttpRequest, QuerySet[ProviderConnection]], None]


@dataclass(frozen=True, slots=True)
class LockedModel:
    """One locked model of the connection, as the change page lists it."""

    model: str
    reason: str
    until: str
    remaining: str


def locked_model(lock: LockView) -> LockedModel:
    return LockedModel(
        model=lock.model,
        reason=lock.reason,
        until=moment(datetime.fromtimestamp(lock.until, UTC)),
        remaining=human_seconds(math.ceil(lock.remaining_ms / 1000)),
    )


def live_locks(connection: ProviderConnection) -> list[LockView]:
    """The connection's active model locks, read once per instance (the changelist reads the
    locks of its page together beforehand)."""
    locks = getattr(connection, LOCKS_ATTRIBUTE, None)
    if not isinstance(locks, list):
        locks = lockouts_by_connection().get(connection.pk, [])
        setattr(connection, LOCKS_ATTRIBUTE, locks)
    return locks


def attach_locks(connections: list[ProviderConnection]) -> None:
    """Keep each connection's active locks on it, from one scan of the store."""
    grouped = lockouts_by_connection()
    for connection in connections:
        setattr(connection, LOCKS_ATTRIBUTE, grouped.get(connection.pk, []))


class ConnectionVerbsMixin(_Base):
    """URLs and context of the change page's buttons (mixed into the connection admin)."""

    clear_errors: Action
    reset_terminal: Action

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view  # staff only, CSRF-protected
        name = f"{self.opts.app_label}_{self.opts.model_name}"
        verbs = (
            ("clear-cooldown", self.clear_cooldown_view, "clear_cooldown"),
            ("reset-terminal", self.reset_terminal_view, "reset_terminal"),
            ("unlock", self.unlock_view, "unlock"),
        )
        return [
            *(path(f"<path:object_id>/{p}/", wrap(v), name=f"{name}_{n}") for p, v, n in verbs),
            *super().get_urls(),
        ]

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        connection = self.get_object(request, object_id)
        context = {**(extra_context or {})}
        if connection is not None:
            context["locked_models"] = [locked_model(lock) for lock in live_locks(connection)]
            context["can_act"] = self.has_change_permission(request, connection)
        return super().change_view(request, object_id, form_url, context)

    def _acted_on(self, request: HttpRequest, object_id: str) -> ProviderConnection:
        """The connection a button posted for, with the permission to change it."""
        connection = self.get_object(request, object_id)
        if connection is None:
            raise Http404("No such connection.")
        if not self.has_change_permission(request, connection):
            raise PermissionDenied
        return connection

    def _run(self, request: HttpRequest, object_id: str, action: Action) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        connection = self._acted_on(request, object_id)
        action(request, self.get_queryset(request).filter(pk=connection.pk))
        return self._back(connection)

    def clear_cooldown_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return self._run(request, object_id, self.clear_errors)

    def reset_terminal_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return self._run(request, object_id, self.reset_terminal)

    def unlock_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """POST ``model`` to unlock it on this connection (no model: every locked model)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        connection = self._acted_on(request, object_id)
        wanted = str(request.POST.get("model") or "").strip()
        models = [wanted] if wanted else [lock.model for lock in live_locks(connection)]
        provider = connection.provider.slug
        removed = sum(
            lockouts_unlock(provider=provider, model=m, connection_id=connection.pk) for m in models
        )
        what = wanted or "every locked model"
        message = f"Unlocked {what} on {connection.name}: {removed} lock(s) removed."
        self.message_user(request, message, messages.SUCCESS if removed else messages.WARNING)
        return self._back(connection)

    def _back(self, connection: ProviderConnection) -> HttpResponse:
        name = f"admin:{self.opts.app_label}_{self.opts.model_name}_change"
        return HttpResponseRedirect(reverse(name, args=[connection.pk]))
