"""The breaker list: each provider's persisted breaker at a glance, reset as an action."""

from __future__ import annotations

import time
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html_join

from omniroute.core.admin import BoundedAdmin, Tone, human_seconds, moment, state_badge
from resilience.domain.breaker.machine import Breaker, BreakerState
from resilience.models import CircuitBreaker
from resilience.persistence import policy_from_dict
from resilience.services.operations import breakers_reset

STATE_TONES = {
    BreakerState.CLOSED: Tone.OK,
    BreakerState.DEGRADED: Tone.WARN,
    BreakerState.OPEN: Tone.BAD,
    BreakerState.HALF_OPEN: Tone.WARN,
}
RECENT_TRANSITIONS = 3


def _breaker(row: CircuitBreaker) -> Breaker:
    return Breaker.from_dict(row.options or {})


@admin.register(CircuitBreaker)
class CircuitBreakerAdmin(BoundedAdmin):
    """Read-only breaker state; operators act through the reset action."""

    # One state column with the time left; the transitions are on the breaker's page.
    list_display = ("name", "coloured_state", "failure_count", "open_cycles", "updated")
    list_filter = ("state",)
    search_fields = ("name",)
    readonly_fields = (
        "name",
        "coloured_state",
        "failure_count",
        "retry_after",
        "open_cycles",
        "recent_transitions",
        "last_failure",
        "options",
    )
    actions = ("reset_breakers",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="state", ordering="state")
    def coloured_state(self, row: CircuitBreaker) -> str:
        """The state, and while requests are held back the time until the next may go
        through: "open 18 s", "half-open", "degraded", "closed"."""
        state = _breaker(row).state
        text = state.value.replace("_", "-")
        if (wait := self.retry_after(row)) != "—":
            text = f"{text} {wait}"
        return state_badge(text, STATE_TONES.get(state, Tone.QUIET))

    @admin.display(description="updated", ordering="updated_at")
    def updated(self, row: CircuitBreaker) -> str:
        return moment(row.updated_at)

    @admin.display(description="last failure")
    def last_failure(self, row: CircuitBreaker) -> str:
        return moment(row.last_failure_time)

    @admin.display(description="retry after")
    def retry_after(self, row: CircuitBreaker) -> str:
        policy = policy_from_dict((row.options or {}).get("policy"))
        return human_seconds(int(_breaker(row).retry_after(policy, time.time()) + 0.999))

    @admin.display(description="open cycles")
    def open_cycles(self, row: CircuitBreaker) -> int:
        return _breaker(row).open_cycle_count

    @admin.display(description="recent transitions")
    def recent_transitions(self, row: CircuitBreaker) -> str:
        steps = _breaker(row).transitions[-RECENT_TRANSITIONS:]
        return (
            format_html_join(
                "",
                "<div>{} → {} ({})</div>",
                ((s.from_state.value, s.to_state.value, s.reason) for s in reversed(steps)),
            )
            or "—"
        )

    def has_reset_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("resilience.change_circuitbreaker"))

    @admin.action(description="Reset selected breakers to closed", permissions=["reset"])
    def reset_breakers(self, request: HttpRequest, queryset: QuerySet[CircuitBreaker]) -> None:
        count = breakers_reset(names=list(queryset.values_list("name", flat=True)))
        self.message_user(request, f"Reset {count} breaker(s).", messages.SUCCESS)
