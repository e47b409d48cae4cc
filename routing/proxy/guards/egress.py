"""The egress-bucketed lock: a quota 429 cools every sibling behind
the same egress.

Some providers count quota per egress address rather than per key. For those (the provider
flag ``egress_bucketed_lock``) a 429 classified as quota exhausted or rate limited cools the
failing connection and every connection of the provider seen behind the same egress in the
last 24 h (the proxy log: the connection's outbound proxy, or the gateway host itself). Terminal
siblings and siblings already cooling longer are left alone; ``disable_cooling`` skips the
branch. Every attempt's egress is logged, at most once a minute per connection and egress,
in the background.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time

from omniroute.core.db import db_sync_to_async
from omniroute.core.store import StateStore
from resilience.services.connections import connection_cool_siblings
from routing.domain.attempts.outcomes import Outcome
from routing.domain.plan.planning import Target
from routing.models import ProxyLog
from routing.proxy.context import AttemptContext
from routing.services.egress import proxy_log_touch

LOG_INTERVAL_SECONDS = 60.0
LOOKBACK = dt.timedelta(hours=24)
LOCKING_REASONS = frozenset({"quota_exhausted", "rate_limit_exceeded"})

_logged: dict[tuple[int, str], float] = {}
_background: set[asyncio.Task[None]] = set()


def egress_siblings(*, provider: str, egress: str, since: dt.datetime) -> list[int]:
    """Connections of ``provider`` whose last egress seen since ``since`` is ``egress`` (sync)."""
    rows = ProxyLog.objects.filter(provider=provider, seen_at__gte=since).order_by("seen_at")
    last: dict[int, str] = {}
    for connection_id, seen_egress in rows.values_list("connection_id", "egress"):
        last[connection_id] = seen_egress  # ordered by time: the latest wins
    return [connection_id for connection_id, seen in last.items() if seen == egress]


def _log(target: Target, now: float) -> None:
    """Log the attempt's egress at ``now`` (the store's clock), throttled per process."""
    key = (target.connection.id, target.connection.egress)
    tick = time.monotonic()
    if tick - _logged.get(key, -LOG_INTERVAL_SECONDS) < LOG_INTERVAL_SECONDS:
        return
    _logged[key] = tick
    write = db_sync_to_async(proxy_log_touch)(
        provider=target.provider.slug,
        connection_id=target.connection.id,
        egress=target.connection.egress,
        now=dt.datetime.fromtimestamp(now, dt.UTC),
    )
    task = asyncio.ensure_future(write)
    _background.add(task)
    task.add_done_callback(_background.discard)


class EgressRecorder:
    """Logs each attempt's egress and applies the egress-bucketed lock after a quota 429."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    async def record(self, target: Target, outcome: Outcome, context: AttemptContext) -> None:
        if not target.provider.egress_bucketed_lock:
            return
        _log(target, self.store.clock())
        verdict = context.loop.verdict(target)
        marked = verdict.marked if verdict is not None else None
        reason = str(marked.classification.reason) if marked and marked.classification else ""
        if outcome.status != 429 or reason not in LOCKING_REASONS or marked is None:
            return
        if target.connection.disable_cooling or marked.cooldown_ms <= 0:
            return
        await self._cool_siblings(target, context, marked.cooldown_ms)

    async def _cool_siblings(
        self, target: Target, context: AttemptContext, cooldown_ms: int
    ) -> None:
        since = dt.datetime.fromtimestamp(self.store.clock(), dt.UTC) - LOOKBACK
        seen = set(
            await db_sync_to_async(egress_siblings)(
                provider=target.provider.slug, egress=target.connection.egress, since=since
            )
        )
        siblings = {
            c.id: c.state
            for c in context.facts.snapshot.connections_for(target.provider.slug)
            if c.id in seen and c.id != target.connection.id and not c.disable_cooling
        }
        if siblings:
            await connection_cool_siblings(
                store=self.store, durable=siblings, cooldown_ms=cooldown_ms
            )
