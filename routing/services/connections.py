"""Provider connection writes; secrets enter here and are encrypted before saving."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from routing.domain.vocabulary import TestStatus
from routing.models import ProviderConnection
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


@transaction.atomic
def connection_save(
    *,
    connection: ProviderConnection,
    fields: dict[str, Any] | None = None,
    secret: str | None = None,
    refresh_secret: str | None = None,
) -> ProviderConnection:
    """Create or update a connection. A ``None`` secret keeps the stored one; "" clears it."""
    for name, value in (fields or {}).items():
        setattr(connection, name, value)
    if secret is not None:
        connection.set_secret(secret)
    if refresh_secret is not None:
        connection.set_refresh_secret(refresh_secret)
    connection.full_clean()
    connection.save()
    announce_change()
    return connection


@transaction.atomic
def connection_clear_error(*, connection: ProviderConnection) -> ProviderConnection:
    """Clear the cooldown, error fields and terminal state: the connection is routable again."""
    connection.rate_limited_until = None
    connection.test_status = TestStatus.ACTIVE
    connection.last_error = ""
    connection.last_error_at = None
    connection.last_error_type = ""
    connection.error_code = ""
    connection.backoff_level = 0
    connection.save(update_fields=[*ERROR_FIELDS, "updated_at"])
    announce_change()
    return connection


@transaction.atomic
def connection_delete(*, connection: ProviderConnection) -> None:
    """Delete a connection (its combo pins go with it)."""
    connection.delete()
    announce_change()
