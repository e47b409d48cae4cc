"""The strategies that rank a combo's targets by their accounts' quota, over the snapshots
``routing.proxy.guards.quota`` keeps per connection:

* ``reset-aware``: the reset-aware score, ties taking turns (counter ``reset-aware:<combo>``);
* ``reset-window``: the soonest reset of the configured windows first, ties taking turns
  (counter ``reset-window:<combo>``);
* ``headroom``: the most unused share of the 5-hour and weekly windows first.

The snapshots are read off the upstream's own answers (no usage API is polled): a window
whose reset has passed since the reading counts as unused, and with
``resetAwareQuotaCacheMaxStaleMs`` set a reading older than that counts as unknown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from omniroute.core.store import StateStore
from routing.domain.config.combo_options import ComboOptions
from routing.domain.config.vocabulary import Strategy
from routing.domain.plan.planning import RoutePlan, Target
from routing.domain.quota.snapshots import QuotaSnapshot, quota_key
from routing.strategies import sources
from routing.strategies.quota.reset import ResetAwareConfig, headroom, reset_aware, reset_window
from routing.strategies.request import COUNTER_TTL_SECONDS, Ordered, OrderRequest

QUOTA_STRATEGIES = frozenset({Strategy.RESET_AWARE, Strategy.RESET_WINDOW, Strategy.HEADROOM})


async def order_by_quota(request: OrderRequest, store: StateStore) -> Ordered:
    """The plan's targets in the order of its quota strategy (``sources.wall_clock``: now)."""
    return Ordered(await quota_ordered(request.plan, store, request.options))


async def quota_ordered(
    plan: RoutePlan, store: StateStore, options: ComboOptions
) -> tuple[Target, ...]:
    """``plan``'s targets in the order of its quota strategy."""
    now = sources.wall_clock()
    max_stale = options.reset_aware_quota_cache_max_stale_ms / 1000
    snapshots = await _snapshots(store, plan.targets, now, max_stale)

    def lookup(target: Target) -> QuotaSnapshot | None:
        return snapshots.get(target.connection.id)

    if plan.strategy == Strategy.HEADROOM:
        return headroom(plan.targets, lookup)
    counter = await store.incr(f"{plan.strategy}:{plan.combo}", ttl=COUNTER_TTL_SECONDS) - 1
    if plan.strategy == Strategy.RESET_WINDOW:
        windows = list(options.reset_window_windows)
        if options.reset_window_include_session and "session" not in windows:
            windows.append("session")
        return reset_window(
            plan.targets, lookup, now, windows, options.reset_window_tie_band_ms, counter
        )
    config = ResetAwareConfig(
        options.reset_aware_session_weight,
        options.reset_aware_weekly_weight,
        options.reset_aware_tie_band_percent,
        options.reset_aware_exhaustion_guard_percent,
    )
    return reset_aware(plan.targets, lookup, now, config, counter)


async def _snapshots(
    store: StateStore, targets: Sequence[Target], now: float, max_stale: float
) -> dict[int, QuotaSnapshot]:
    """Each connection's snapshot as of ``now`` (read once per connection, concurrently)."""
    connections = sorted({t.connection.id for t in targets})
    records = await asyncio.gather(*(store.get(quota_key(c)) for c in connections))
    found: dict[int, QuotaSnapshot] = {}
    for connection, record in zip(connections, records, strict=True):
        snapshot = QuotaSnapshot.from_record(record)
        if snapshot is None or (max_stale > 0 and now - snapshot.taken_at > max_stale):
            continue
        found[connection] = snapshot.as_of(now)
    return found
