"""The strategies that rank a combo's targets by their accounts' quota (reference-part2 §7.2
items 10-12, §7.4), over the snapshots ``routing.guards.quota`` keeps per connection:

* ``reset-aware``: the §7.4 score, the tie band taking turns (counter ``reset-aware:<combo>``);
* ``reset-window``: the soonest reset of the configured windows first, ties taking turns
  (counter ``reset-window:<combo>``);
* ``headroom``: the most unused share of the 5-hour and weekly windows first.

The snapshots are read off the upstream's own answers (no usage API is polled): a window
whose reset has passed since the reading counts as unused, and with
``resetAwareQuotaCacheMaxStaleMs`` set a reading older than that counts as unknown.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from resilience.store import StateStore
from routing.attempts import AttemptContext
from routing.domain.combo_options import ComboOptions
from routing.domain.planning import Target
from routing.domain.quota import QuotaSnapshot, quota_key
from routing.domain.reset_ordering import ResetAwareConfig, headroom, reset_aware, reset_window
from routing.domain.vocabulary import Strategy

QUOTA_STRATEGIES = frozenset({Strategy.RESET_AWARE, Strategy.RESET_WINDOW, Strategy.HEADROOM})
COUNTER_TTL_SECONDS = 24 * 3600.0
clock: Callable[[], float] = time.time


async def quota_ordered(
    context: AttemptContext, store: StateStore, options: ComboOptions
) -> tuple[Target, ...]:
    """``context.plan``'s targets in the order of its quota strategy."""
    plan = context.plan
    now = clock()
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
        options.reset_aware_session_weight, options.reset_aware_weekly_weight,
        options.reset_aware_tie_band_percent, options.reset_aware_exhaustion_guard_percent,
    )  # fmt: skip
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
