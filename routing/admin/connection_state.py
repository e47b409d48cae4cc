"""A connection's live state at a glance: the change list's one state column (a badge with the
time left, one more for locked models) and its filter by live state.

The state is the one the change page shows in full: the state store's record when there is one,
else the row's (see ``routing.selectors.connection_states_live``).
"""

from __future__ import annotations

import math
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

from omniroute.core.admin import Tone, human_seconds, moment, state_badge
from resilience.domain.connection_state import ConnectionState
from resilience.services.lockout_operations import LockView
from routing.models import ProviderConnection
from routing.selectors import (
    COOLING,
    LIVE_STATES,
    LOCKED,
    TERMINAL,
    connection_state_columns,
    connections_in_live_state,
)

ERROR_SHOWN_CHARS = 200  # of the last error, in the badge's hover text


def _error_detail(state: ConnectionState) -> str:
    """The last error in one line for the hover text: type, code, time and message."""
    if not (state.last_error or state.last_error_type):
        return ""
    at = moment(connection_state_columns(state)["last_error_at"])
    code = f" ({state.error_code})" if state.error_code else ""
    return (
        f"{state.last_error_type or 'error'}{code} at {at}: {state.last_error[:ERROR_SHOWN_CHARS]}"
    )


def _main_badge(state: ConnectionState, now: float) -> SafeString:
    detail = _error_detail(state)
    if state.is_terminal:
        return state_badge(str(state.test_status).replace("_", " "), Tone.BAD, detail)
    if (left := state.remaining(now)) > 0:
        return state_badge(f"cooling {human_seconds(math.ceil(left))}", Tone.WARN, detail)
    return state_badge("available", Tone.OK, detail)


def _locks_badge(locks: list[LockView], now: float) -> SafeString:
    count = len(locks)
    names = ", ".join(
        f"{lock.model} ({human_seconds(math.ceil(lock.until - now))})" for lock in locks
    )
    return state_badge(f"locked {count} model{'s' if count != 1 else ''}", Tone.WARN, names)


def connection_state_badges(
    state: ConnectionState, locks: list[LockView], now: float
) -> SafeString:
    """ "available", "cooling 12 s" or the terminal state, then "locked 2 models" if any."""
    badges = [_main_badge(state, now), *([_locks_badge(locks, now)] if locks else [])]
    return format_html_join("", "{}", ((badge,) for badge in badges))


class ConnectionStateFilter(admin.SimpleListFilter):
    """Connections by live state: cooling, in a terminal state, or with locked models."""

    title = "live state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(COOLING, "cooling"), (TERMINAL, "terminal"), (LOCKED, "with locked models")]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[ProviderConnection]
    ) -> QuerySet[ProviderConnection]:
        state = self.value()
        return connections_in_live_state(queryset, state) if state in LIVE_STATES else queryset
