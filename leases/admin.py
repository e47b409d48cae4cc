"""The leases list for operators: who holds which connection, under which key and generation,
until when. Nothing is edited by hand; "Revoke (invalidate)" goes through the lease service.

Only the first characters of the owner hash are shown: enough to tell leases apart, nothing to
replay (the owner token itself is never stored at all)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ActionForm
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from leases.domain.states import (
    DEFAULT_REVOKE_REASON,
    REVOKE_REASONS,
    EndReason,
    LeaseOutcome,
    LeaseState,
)
from leases.models import ExclusiveConnectionLease
from leases.services import lease_invalidate
from omniroute.core.admin import BoundedAdmin, Tone, human_duration, moment, state_badge

OWNER_PREFIX_CHARS = 12
EXPIRED_NOT_ENDED = "ACTIVE (expired, ends at the next lease operation)"
LEASE_FIELDS = (
    "owner",
    "live_state",
    "provider",
    "connection_id",
    "api_key_id",
    "generation",
    "acquired_at",
    "renewed_at",
    "expires_at",
    "ended_at",
    "end_reason",
)


class RevokeActionForm(ActionForm):
    """The action bar, plus the reason a revocation records."""

    reason = forms.ChoiceField(
        choices=[(reason.value, reason.value) for reason in REVOKE_REASONS],
        initial=DEFAULT_REVOKE_REASON.value,
        required=False,
        help_text="Recorded as the end reason of the revoked leases.",
    )


def _revoke_reason(request: HttpRequest) -> EndReason | None:
    """The reason the operator picked (the default when none), or None if it is not one of
    ``REVOKE_REASONS``."""
    value = request.POST.get("reason") or DEFAULT_REVOKE_REASON.value
    return next((reason for reason in REVOKE_REASONS if reason.value == value), None)


@admin.register(ExclusiveConnectionLease)
class ExclusiveConnectionLeaseAdmin(BoundedAdmin):
    """Read-only leases; operators end one through the revoke action."""

    # One state column with the time left; the other times are on the lease's page.
    list_display = (
        "owner",
        "live_state",
        "provider",
        "connection_id",
        "api_key_id",
        "generation",
        "acquired_at",
    )
    list_filter = ("state", "provider", "end_reason")
    search_fields = ("=connection_id", "=api_key_id")
    search_help_text = "A connection id or an API key id."
    fields = LEASE_FIELDS
    readonly_fields = LEASE_FIELDS
    action_form = RevokeActionForm
    actions = ("revoke_leases",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the history keeps every generation used: deleting it could reuse one

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("leases.change_exclusiveconnectionlease"))

    @admin.display(description="owner")
    def owner(self, row: ExclusiveConnectionLease) -> str:
        return f"{row.lease_owner_hash[:OWNER_PREFIX_CHARS]}…"

    @admin.display(description="state", ordering="state")
    def live_state(self, row: ExclusiveConnectionLease) -> str:
        """ "active" with the time left, "expired" or the ended state and its reason."""
        now = timezone.now()
        if row.state != LeaseState.ACTIVE:
            ended = f"{row.state.lower()}: {row.end_reason}" if row.end_reason else row.state
            return state_badge(ended.lower(), Tone.QUIET, f"ended {moment(row.ended_at)}")
        # Expiry is lazy: an ACTIVE row past its expiry ends at the next lease operation.
        if row.expires_at <= now:
            return state_badge("expired", Tone.QUIET, EXPIRED_NOT_ENDED)
        left = human_duration(row.expires_at - now)
        return state_badge(f"active, {left} left", Tone.OK, f"expires {moment(row.expires_at)}")

    @admin.action(description="Revoke (invalidate) selected leases", permissions=["revoke"])
    def revoke_leases(
        self, request: HttpRequest, queryset: QuerySet[ExclusiveConnectionLease]
    ) -> None:
        reason = _revoke_reason(request)
        if reason is None:
            self.message_user(request, "Pick one of the listed reasons.", messages.ERROR)
            return
        now = timezone.now()
        selected = list(queryset.values_list("pk", "lease_owner_hash", "generation", "api_key_id"))
        revoked = sum(
            lease_invalidate(
                owner_hash=owner,
                generation=generation,
                api_key_id=key,
                reason=reason,
                now=now,
                lease_id=pk,  # this row: never the owner's lease elsewhere after a fail-over
            ).outcome
            is LeaseOutcome.INVALIDATED
            for pk, owner, generation, key in selected
        )
        self.message_user(request, _revoked_message(revoked, len(selected), reason))


def _revoked_message(revoked: int, selected: int, reason: EndReason) -> str:
    message = f"Revoked {revoked} lease(s) ({reason.value})."
    if selected > revoked:
        message += f" {selected - revoked} selected lease(s) were no longer active."
    return message
