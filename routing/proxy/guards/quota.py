"""Quota snapshots per connection, read off the upstream's rate-limit headers
(``x-ratelimit-*``, ``anthropic-ratelimit-*``) of every answer that carries them, success or
failure, from the providers that a combo of a quota-reading strategy routes to, and kept in
the state store for those strategies (``reset-aware``, ``reset-window``, ``headroom``,
``auto``) and the context-relay handoff.

An answer without such headers changes nothing: the last reading stands until it expires
(:data:`SNAPSHOT_TTL_SECONDS`), and its windows' reset times say how current it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from omniroute.core.store import StateStore
from routing.domain.attempts.outcomes import Outcome
from routing.domain.config.snapshot import ConfigSnapshot
from routing.domain.config.vocabulary import Strategy
from routing.domain.plan.planning import Target
from routing.domain.plan.resolution import combo_leaves
from routing.domain.quota.snapshots import quota_key, snapshot_from_headers
from routing.proxy.context import AttemptContext
from routing.proxy.upstream.client import RATE_LIMIT_PREFIXES

SNAPSHOT_TTL_SECONDS = 8 * 24 * 3600.0  # past a weekly window's reset


QUOTA_READERS = frozenset(
    {
        Strategy.RESET_AWARE,
        Strategy.RESET_WINDOW,
        Strategy.HEADROOM,
        Strategy.AUTO,
        Strategy.CONTEXT_RELAY,
    }
)


def quota_providers(snapshot: ConfigSnapshot) -> frozenset[str]:
    """The providers some combo that reads quota snapshots routes to (nested combos too)."""
    return frozenset(
        leaf.provider
        for combo in snapshot.combos.values()
        if combo.strategy in QUOTA_READERS
        for leaf in combo_leaves(snapshot, combo)
    )


class QuotaRecorder:
    """Keeps the connection's latest quota snapshot, for the providers a quota-reading combo
    routes to (no store write for the others: most answers carry rate-limit headers)."""

    def __init__(self, store: StateStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self._readers: tuple[ConfigSnapshot, frozenset[str]] | None = None

    def _providers(self, snapshot: ConfigSnapshot) -> frozenset[str]:
        if self._readers is None or self._readers[0] is not snapshot:
            self._readers = (snapshot, quota_providers(snapshot))
        return self._readers[1]

    async def record(self, target: Target, outcome: Outcome, context: AttemptContext) -> None:
        headers = outcome.headers
        if not headers or target.provider.slug not in self._providers(context.facts.snapshot):
            return
        if not any(name.startswith(RATE_LIMIT_PREFIXES) for name in headers):
            return
        snapshot = snapshot_from_headers(headers, self.clock())
        if snapshot is not None:
            key = quota_key(target.connection.id)
            await self.store.set(key, snapshot.to_record(), ttl=SNAPSHOT_TTL_SECONDS)
