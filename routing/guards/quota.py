"""Quota snapshots per connection, read off the upstream's rate-limit headers
(``x-ratelimit-*``, ``anthropic-ratelimit-*``) of every answer that carries them, success or
failure, and kept in the state store for the strategies that rank by quota (``reset-aware``,
``reset-window``, ``headroom``, ``auto``) and the context-relay handoff.

An answer without such headers changes nothing: the last reading stands until it expires
(:data:`SNAPSHOT_TTL_SECONDS`), and its windows' reset times say how current it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from resilience.store import StateStore
from routing.attempts import AttemptContext
from routing.domain.outcomes import Outcome
from routing.domain.planning import Target
from routing.domain.quota import quota_key, snapshot_from_headers

SNAPSHOT_TTL_SECONDS = 8 * 24 * 3600.0  # past a weekly window's reset
_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")


class QuotaRecorder:
    """Keeps the connection's latest quota snapshot."""

    def __init__(self, store: StateStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock

    async def record(self, target: Target, outcome: Outcome, context: AttemptContext) -> None:
        headers = outcome.headers
        if not headers or not any(name.startswith(_PREFIXES) for name in headers):
            return
        snapshot = snapshot_from_headers(headers, self.clock())
        if snapshot is not None:
            key = quota_key(target.connection.id)
            await self.store.set(key, snapshot.to_record(), ttl=SNAPSHOT_TTL_SECONDS)
