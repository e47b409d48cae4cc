"""Shared steps of the model-cooldowns API and admin tests: connections and locks."""

from __future__ import annotations

import datetime as dt

from asgiref.sync import async_to_sync

from omniroute.core.store import StateStore
from resilience.domain.lockout import LockoutSettings, LockRequest, LockScope
from resilience.services.lockouts import lockout_record_failure
from routing.models import Provider, ProviderConnection
from routing.services import connection_save


def connection(provider: str, name: str) -> int:
    """A new connection of a seeded provider; its id."""
    fields = {"provider": Provider.objects.get(slug=provider), "name": name}
    return connection_save(connection=ProviderConnection(), fields=fields).pk


def lock(
    store: StateStore,
    provider: str,
    connection_id: int,
    model: str,
    *,
    seconds: int = 0,
    scope: LockScope = LockScope.QUOTA_FAMILY,
) -> None:
    """Lock ``model`` on the connection: for ``seconds``, or the default first cooldown."""
    request = LockRequest("rate_limit", seconds * 1000 or None, True)
    async_to_sync(lockout_record_failure)(
        store=store,
        provider=provider,
        connection_id=connection_id,
        model=model,
        scope=scope,
        request=request,
        settings=LockoutSettings(),
        tz=dt.UTC,
    )
