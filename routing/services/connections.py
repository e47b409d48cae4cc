"""Provider connection writes; secrets enter here and are encrypted before saving."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from leases.interface import leases_invalidate_for_connection
from omniroute.core import tasks
from omniroute.core.bounds import is_header_value
from omniroute.core.state import get_store
from resilience.domain.connection_state import ConnectionState
from resilience.services.connections import connection_state_get, connection_state_reset
from resilience.services.streaks import streak_clear
from resilience.services.window_gate import window_gate_forget
from routing.domain.config.vocabulary import TERMINAL_STATUSES, TestStatus
from routing.models import ProviderConnection
from routing.selectors import connection_state_columns
from routing.services._changes import announce_change

ERROR_FIELDS = (
    "rate_limited_until",
    "test_status",
    "last_error",
    "last_error_at",
    "last_error_type",
    "error_code",
    "backoff_level",
)
EXPIRED_RETRY_FIELDS = ("expired_retry_count", "expired_retry_at")
# What an operator edits on a connection (admin and API); its state changes only through the
# services above.
SETTINGS_FIELDS = (
    "provider",
    "name",
    "priority",
    "is_active",
    "auth_type",
    "base_url",
    "served_models",
    "max_concurrent",
    "rate_limit_protection",
    "rate_limit_overrides",
    "disable_cooling",
    "proxy_url",
    "extras",
)
FLUSH_TIMEOUT_SECONDS = 10.0
SECRET_NOT_A_HEADER = (
    "The secret is sent to the provider in an HTTP header: it must be printable ASCII text "
    "(no accents, spaces at the ends or line breaks)."
)

logger = logging.getLogger(__name__)


@transaction.atomic
def connection_save(
    *,
    connection: ProviderConnection,
    fields: dict[str, Any] | None = None,
    secret: str | None = None,
    refresh_secret: str | None = None,
) -> ProviderConnection:
    """Create or update a connection. A ``None`` secret keeps the stored one; "" clears it.

    New credentials lift a terminal state (it lasts until the credentials change).
    """
    for name, value in (fields or {}).items():
        setattr(connection, name, value)
    if secret and not is_header_value(secret):  # else every request to it fails in the gateway
        raise ValidationError({"secret": ValidationError(SECRET_NOT_A_HEADER, code="invalid")})
    if secret is not None:
        connection.set_secret(secret)
    if refresh_secret is not None:
        connection.set_refresh_secret(refresh_secret)
    connection.full_clean()
    renewed = connection.pk is not None and (secret or refresh_secret)
    connection.save()  # a lease bound to it, if disabled, moves on its next request
    announce_change()
    if renewed and connection_is_terminal(connection=connection):
        transaction.on_commit(lambda: connection_reset_terminal(connection=connection))
    return connection


async def _forget_live_state(connection_id: int, provider: str) -> None:
    store = get_store()
    await connection_state_reset(store=store, connection_id=connection_id)
    await streak_clear(store=store, connection_id=connection_id)  # an operator reset clears it too
    await window_gate_forget(store=store, provider=provider, connection_id=connection_id)
    # A write-through queued before the reset would otherwise land after the row is cleared.
    # It runs on Django's single sync thread: a caller on that very thread would wait forever,
    # hence the bound (the flush is left running on timeout, never cancelled).
    flush = asyncio.ensure_future(tasks.flush())
    _, pending = await asyncio.wait({flush}, timeout=FLUSH_TIMEOUT_SECONDS)
    if pending:
        logger.warning("connection %s cleared before its queued write-through ran", connection_id)


async def _live_state(connection_id: int, durable: ConnectionState) -> ConnectionState:
    return await connection_state_get(
        store=get_store(), connection_id=connection_id, durable=durable
    )


def connection_state_write(connection_id: int, state: ConnectionState) -> None:
    """Write a connection's live cooldown and error state to its row (the write-through the
    resilience layer queues; registered at start-up, see ``routing.apps``)."""
    ProviderConnection.objects.filter(pk=connection_id).update(
        **connection_state_columns(state), updated_at=timezone.now()
    )


def connection_clear_error(*, connection: ProviderConnection) -> ProviderConnection:
    """Clear the cooldown, error fields, terminal state and expired re-checks: routable again.

    The live state in the state store (authoritative at run time) is forgotten first, and the
    queued write-through waited for, so nothing re-dirties the row afterwards. Sync only: it
    bridges to the store with ``async_to_sync``. From async code call it through
    ``sync_to_async(..., thread_sensitive=False)``: the write-through it waits for needs
    Django's single sync thread.
    """
    async_to_sync(_forget_live_state)(connection.pk, connection.provider_id)
    return _clear_row(connection)


@transaction.atomic
def _clear_row(connection: ProviderConnection) -> ProviderConnection:
    connection.rate_limited_until = None
    connection.test_status = TestStatus.ACTIVE
    connection.last_error = ""
    connection.last_error_at = None
    connection.last_error_type = ""
    connection.error_code = ""
    connection.backoff_level = 0
    connection.expired_retry_count = 0
    connection.expired_retry_at = None
    connection.save(update_fields=[*ERROR_FIELDS, *EXPIRED_RETRY_FIELDS, "updated_at"])
    announce_change()
    return connection


def connection_is_terminal(*, connection: ProviderConnection) -> bool:
    """Banned, expired or out of credits, by the row or by the live state in the store (whose
    write-through to the row may still be queued)."""
    if connection.test_status in TERMINAL_STATUSES:
        return True
    durable = ConnectionState(test_status=connection.test_status)
    return async_to_sync(_live_state)(connection.pk, durable).is_terminal


def connection_reset_terminal(*, connection: ProviderConnection) -> bool:
    """Bring a terminal connection back to active (as ``connection_clear_error`` does).

    Returns False and changes nothing when the connection is not terminal: a mere cooldown is
    ``connection_clear_error``'s to clear.
    """
    if not connection_is_terminal(connection=connection):
        return False
    connection_clear_error(connection=connection)
    return True


@transaction.atomic
def connection_delete(*, connection: ProviderConnection) -> None:
    """Delete a connection (its combo pins go with it, and the lease that binds it ends)."""
    leases_invalidate_for_connection(connection_id=connection.pk)
    connection.delete()
    announce_change()
