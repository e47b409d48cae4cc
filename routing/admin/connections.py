"""Admin of provider connections: write-only secrets, read-only state, the state actions.

The state columns show the live state: the state store's record when there is one (it is
authoritative; the row is its durable copy and may lag behind), else the row's. The changelist
reads the whole page's states at once. Sorting and filtering still go by the row.
"""

from __future__ import annotations

import math
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from omniroute.core.admin import (
    LinesField,
    ModelFormBase,
    ServiceAdmin,
    formfield,
    human_seconds,
    moment,
)
from omniroute.core.bounds import is_header_value
from resilience.domain.connection_state import ConnectionState
from routing.admin.connection_state import ConnectionStateFilter, connection_state_badges
from routing.admin.connection_verbs import ConnectionVerbsMixin, attach_locks, live_locks
from routing.crypto import mask_url_credentials
from routing.domain.config.timing import cooldown_remaining_seconds
from routing.domain.config.vocabulary import TestStatus
from routing.models import ProviderConnection
from routing.selectors import (
    connection_state_columns,
    connection_state_live,
    connection_states_live,
)
from routing.services import (
    connection_clear_error,
    connection_delete,
    connection_reset_terminal,
    connection_save,
)
from routing.services.connections import SECRET_NOT_A_HEADER, SETTINGS_FIELDS

STATUS_COLOURS: dict[str, str] = {TestStatus.ACTIVE: "#2e7d32", TestStatus.UNAVAILABLE: "#ef6c00"}
AVAILABLE_COLOUR = STATUS_COLOURS[TestStatus.ACTIVE]
TERMINAL_COLOUR = "#c62828"
LIVE_STATE_ATTRIBUTE = "_live_state"  # the live state read for a row, kept on the instance
CONNECTION_STATE_FIELDS = (
    "status",
    "locked_models",
    "cooldown",
    "cooling_until",
    "backoff",
    "error_type",
    "error_status",
    "error_message",
    "error_at",
    "expired_retry_count",
    "expired_retry_time",
    "created",
    "updated",
)
AVAILABLE = "available"  # not terminal and no cooldown left, whatever the stored status says


def _secret_input(label: str) -> forms.CharField:
    return forms.CharField(
        label=label,
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Never shown again. Leave blank to keep the stored value.",
    )


class ProviderConnectionForm(ModelFormBase):
    """Connection form whose secrets are write-only inputs: blank keeps, "clear" empties."""

    secret = _secret_input("New secret")
    clear_secret = forms.BooleanField(required=False, label="Clear secret")
    refresh_secret = _secret_input("New refresh token")
    clear_refresh_secret = forms.BooleanField(required=False, label="Clear refresh token")
    served_models = LinesField(required=False, help_text="One per line; empty serves any model.")

    class Meta:
        model = ProviderConnection
        formfield_callback = formfield
        fields = SETTINGS_FIELDS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        stored = self.instance.proxy_url if self.instance.pk else ""
        if stored and mask_url_credentials(stored) != stored:  # never render a proxy password
            self.initial["proxy_url"] = mask_url_credentials(stored)

    def clean_proxy_url(self) -> str:
        value = str(self.cleaned_data.get("proxy_url") or "")
        stored = self.instance.proxy_url if self.instance.pk else ""
        return stored if stored and value == mask_url_credentials(stored) else value

    def clean_secret(self) -> str:
        value = str(self.cleaned_data.get("secret") or "")
        if value and not is_header_value(value):  # the service's own rule, shown on the field
            raise forms.ValidationError(SECRET_NOT_A_HEADER)
        return value

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        for name in ("secret", "refresh_secret"):
            if cleaned.get(name) and cleaned.get(f"clear_{name}"):
                self.add_error(f"clear_{name}", "Either enter a new value or clear it, not both.")
        return cleaned

    def secret_change(self, name: str) -> str | None:
        """The service argument for secret field ``name``: None keeps, "" clears, else new."""
        if self.cleaned_data.get(f"clear_{name}"):
            return ""
        return self.cleaned_data.get(name) or None


def _live(connection: ProviderConnection) -> ConnectionState:
    """The connection's live state, read once per instance (the changelist reads its page's
    states together beforehand)."""
    state = getattr(connection, LIVE_STATE_ATTRIBUTE, None)
    if not isinstance(state, ConnectionState):
        state = connection_state_live(connection)
        setattr(connection, LIVE_STATE_ATTRIBUTE, state)
    return state


def _live_columns(connection: ProviderConnection) -> dict[str, Any]:
    return connection_state_columns(_live(connection))


@admin.register(ProviderConnection)
class ProviderConnectionAdmin(ConnectionVerbsMixin, ServiceAdmin):
    """Connections: settings are edited; state only changes through the actions (in the list,
    and as buttons on the change page)."""

    form = ProviderConnectionForm
    # One state column (the details are on the change page): the list fits a 1 280-pixel screen.
    list_display = ("name", "provider", "priority", "is_active", "state", "secret_preview")
    list_display_links = ("name",)
    list_filter = (ConnectionStateFilter, "provider", "test_status", "is_active", "auth_type")
    list_select_related = ("provider",)
    search_fields = ("name", "provider__slug", "provider__name")
    readonly_fields = ("secret_preview", "refresh_secret_preview", *CONNECTION_STATE_FIELDS)
    actions = ("clear_errors", "reset_terminal")
    fieldsets = (
        (
            None,
            {"fields": SETTINGS_FIELDS},
        ),
        (
            "Secrets (stored encrypted, never displayed)",
            {
                "fields": (
                    "secret_preview",
                    "secret",
                    "clear_secret",
                    "refresh_secret_preview",
                    "refresh_secret",
                    "clear_refresh_secret",
                )
            },
        ),
        (
            "State (set by the gateway; changed only by the actions and the buttons above)",
            {"fields": CONNECTION_STATE_FIELDS},
        ),
    )

    def get_changelist_instance(self, request: HttpRequest) -> ChangeList:
        changelist = super().get_changelist_instance(request)
        page = list(changelist.result_list)  # evaluated here; the template reuses these rows
        states = connection_states_live(page)
        for connection in page:
            setattr(connection, LIVE_STATE_ATTRIBUTE, states[connection.pk])
        attach_locks(page)
        return changelist

    @admin.display(description="State", ordering="test_status")
    def state(self, obj: ProviderConnection) -> str:
        """The live state with the time left, and the locked models (hover for details)."""
        return connection_state_badges(_live(obj), live_locks(obj), timezone.now().timestamp())

    @admin.display(description="Status", ordering="test_status")
    def status(self, obj: ProviderConnection) -> str:
        """ "available" once the cooldown has passed (recovery is lazy: the stored status stays
        "unavailable" until the next request), else the stored status."""
        state = _live(obj)
        if state.is_eligible(timezone.now().timestamp()):
            return format_html('<strong style="color: {}">{}</strong>', AVAILABLE_COLOUR, AVAILABLE)
        colour = STATUS_COLOURS.get(state.test_status, TERMINAL_COLOUR)
        return format_html('<strong style="color: {}">{}</strong>', colour, state.test_status)

    @admin.display(description="Locked models")
    def locked_models(self, obj: ProviderConnection) -> str:
        locks = live_locks(obj)
        now = timezone.now().timestamp()
        return (
            format_html_join(
                "",
                "<div>{} ({})</div>",
                ((lock.model, human_seconds(math.ceil(lock.until - now))) for lock in locks),
            )
            or "—"
        )

    @admin.display(description="Secret")
    def secret_preview(self, obj: ProviderConnection) -> str:
        return obj.masked_secret or "—"

    @admin.display(description="Refresh token")
    def refresh_secret_preview(self, obj: ProviderConnection) -> str:
        return "•••• (stored)" if obj.refresh_secret_encrypted else "—"

    @admin.display(description="Cooldown", ordering="rate_limited_until")
    def cooldown(self, obj: ProviderConnection) -> str:
        until = _live_columns(obj)["rate_limited_until"]
        return human_seconds(cooldown_remaining_seconds(until, timezone.now()))

    @admin.display(description="Rate limited until")
    def cooling_until(self, obj: ProviderConnection) -> str:
        return moment(_live_columns(obj)["rate_limited_until"])

    @admin.display(description="Backoff level", ordering="backoff_level")
    def backoff(self, obj: ProviderConnection) -> int:
        return _live(obj).backoff_level

    @admin.display(description="Last error type", ordering="last_error_type")
    def error_type(self, obj: ProviderConnection) -> str:
        return _live(obj).last_error_type

    @admin.display(description="Error code")
    def error_status(self, obj: ProviderConnection) -> str:
        return _live(obj).error_code

    @admin.display(description="Last error")
    def error_message(self, obj: ProviderConnection) -> str:
        return _live(obj).last_error

    @admin.display(description="Last error at", ordering="last_error_at")
    def error_at(self, obj: ProviderConnection) -> str:
        return moment(_live_columns(obj)["last_error_at"])

    @admin.display(description="Last retry of an expired credential")
    def expired_retry_time(self, obj: ProviderConnection) -> str:
        return moment(obj.expired_retry_at)

    @admin.display(description="Created", ordering="created_at")
    def created(self, obj: ProviderConnection) -> str:
        return moment(obj.created_at)

    @admin.display(description="Updated", ordering="updated_at")
    def updated(self, obj: ProviderConnection) -> str:
        return moment(obj.updated_at)

    def save_model(
        self, request: HttpRequest, obj: ProviderConnection, form: Any, change: bool
    ) -> None:
        connection_save(
            connection=obj,
            secret=form.secret_change("secret"),
            refresh_secret=form.secret_change("refresh_secret"),
        )

    def delete_model(self, request: HttpRequest, obj: ProviderConnection) -> None:
        connection_delete(connection=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[ProviderConnection]) -> None:
        for connection in queryset:
            connection_delete(connection=connection)

    @admin.action(description="Clear cooldown and errors", permissions=["change"])
    def clear_errors(self, request: HttpRequest, queryset: QuerySet[ProviderConnection]) -> None:
        connections = list(queryset)
        for connection in connections:
            connection_clear_error(connection=connection)
        self.message_user(
            request,
            f"Cleared cooldown and errors of {len(connections)} connection(s).",
            messages.SUCCESS,
        )

    @admin.action(description="Reset terminal state", permissions=["change"])
    def reset_terminal(self, request: HttpRequest, queryset: QuerySet[ProviderConnection]) -> None:
        """Banned / expired / out-of-credits connections back to active; others untouched."""
        connections = list(queryset)
        reset = sum(connection_reset_terminal(connection=c) for c in connections)
        message = f"Reset the terminal state of {reset} connection(s)."
        if skipped := len(connections) - reset:
            message += f" {skipped} were not in a terminal state and were left as they are."
        self.message_user(request, message, messages.SUCCESS if reset else messages.WARNING)
