"""Admin of session-affinity pins: which connection each client session is on, cleared by an
action (the selected pins) or a button (all of them), through ``routing.services.affinity``.

The list shows the pins' durable copy: a pin that only slid forward is written back at most once
a minute, so its "last used" and "expires" may lag that much behind the live pin in the state
store. Only the session's hash is kept; the session id itself is never stored or shown.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils import timezone

from omniroute.core.admin import BoundedAdmin, Tone, human_duration, moment, state_badge
from routing.models import SessionAffinityPin
from routing.services.affinity import affinity_pins_clear, affinity_pins_clear_all

HASH_SHOWN_CHARS = 12


@admin.register(SessionAffinityPin)
class SessionAffinityPinAdmin(BoundedAdmin):
    """Read-only pins; operators clear them, and those sessions choose afresh next time."""

    change_list_template = "admin/routing/sessionaffinitypin/change_list.html"
    # The pin's time left instead of three dates: the list fits a 1 280-pixel screen.
    list_display = ("session", "provider", "connection_name", "last_used_at", "pin_state")
    list_filter = ("provider",)
    list_select_related = ("connection",)
    search_fields = ("key_hash",)
    readonly_fields = (
        "provider",
        "connection",
        "key_hash",
        "created_at",
        "last_used_at",
        "expires_at",
    )
    actions = ("clear_pins",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # pins go through the clear action, which clears the live pin too

    def has_clear_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("routing.delete_sessionaffinitypin"))

    @admin.display(description="session (hash)")
    def session(self, pin: SessionAffinityPin) -> str:
        return f"{pin.key_hash[:HASH_SHOWN_CHARS]}…"

    @admin.display(description="connection", ordering="connection__name")
    def connection_name(self, pin: SessionAffinityPin) -> str:
        return pin.connection.name

    @admin.display(description="state", ordering="expires_at")
    def pin_state(self, pin: SessionAffinityPin) -> str:
        """ "pinned" with the time left before it lapses, or "lapsed" (as of the last write)."""
        left = pin.expires_at - timezone.now()
        if left.total_seconds() <= 0:
            return state_badge("lapsed", Tone.QUIET, f"lapsed {moment(pin.expires_at)}")
        detail = f"expires {moment(pin.expires_at)} unless the session asks again"
        return state_badge(f"pinned, {human_duration(left)} left", Tone.OK, detail)

    @admin.action(description="Clear selected pins", permissions=["clear"])
    def clear_pins(self, request: HttpRequest, queryset: QuerySet[SessionAffinityPin]) -> None:
        count = affinity_pins_clear(pins=queryset.values_list("provider_id", "key_hash"))
        self.message_user(request, f"Cleared {count} pin(s).", messages.SUCCESS)

    def get_urls(self) -> list[URLPattern]:
        name = f"{self.opts.app_label}_{self.opts.model_name}"
        clear_all = self.admin_site.admin_view(self.clear_all_view)  # staff only, CSRF-protected
        return [path("clear-all/", clear_all, name=f"{name}_clear_all"), *super().get_urls()]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        context = {"can_clear": self.has_clear_permission(request), **(extra_context or {})}
        return super().changelist_view(request, context)

    def clear_all_view(self, request: HttpRequest) -> HttpResponse:
        """POST: clear every pin."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_clear_permission(request):
            raise PermissionDenied
        count = affinity_pins_clear_all()
        self.message_user(request, f"Cleared every pin ({count}).", messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:routing_sessionaffinitypin_changelist"))
