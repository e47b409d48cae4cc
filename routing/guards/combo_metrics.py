"""Per-target signals of combos, in the state store: how many requests each target of a combo
served, how many succeeded, and its latency (an exponentially weighted mean). ``least-used``
and ``p2c`` read them (``routing.strategies``); single-model requests keep none. And the
target that answered last, for the strategies that start from it (``lkgp``, ``auto``).

One record per (combo, execution key) for :data:`METRICS_TTL_SECONDS` after its last update.
"""

from __future__ import annotations

import time
from typing import Any

from resilience.store import Json, StateStore
from routing.attempts import AttemptContext
from routing.domain.outcomes import Outcome
from routing.domain.planning import Target
from routing.domain.quota_share import execution_key
from routing.domain.vocabulary import Strategy

METRICS_TTL_SECONDS = 7 * 24 * 3600.0
LATENCY_WEIGHT = 0.2  # of the newest sample in the mean
_PREFIX = "combo-metrics:"


def metrics_key(combo: str, target: Target) -> str:
    return f"{_PREFIX}{combo}:{execution_key(target)}"


def updated(current: Any, ok: bool, latency_ms: int, now: float | None = None) -> dict[str, Any]:
    """A record with one more request, made at ``now`` (epoch seconds) (pure)."""
    record = current if isinstance(current, dict) else {}
    count = int(record.get("count", 0)) + 1
    succeeded = int(record.get("ok", 0)) + (1 if ok else 0)
    mean = record.get("latency_ms")
    if ok and latency_ms > 0:
        mean = latency_ms if mean is None else mean + LATENCY_WEIGHT * (latency_ms - mean)
    record = {"count": count, "ok": succeeded, "latency_ms": mean}
    return record if now is None else {**record, "at": now}


class ComboMetricsRecorder:
    """Counts each attempt of a combo's target, its success and its latency."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    async def record(self, target: Target, outcome: Outcome, context: AttemptContext) -> None:
        combo = context.plan.combo
        if combo is None:
            return
        ok, latency, now = outcome.ok, outcome.latency_ms, time.time()
        await self.store.update(
            metrics_key(combo, target), lambda current: updated(current, ok, latency, now),
            ttl=METRICS_TTL_SECONDS,
        )  # fmt: skip


LKGP_STRATEGIES = frozenset({Strategy.LKGP, Strategy.AUTO})
LKGP_TTL_SECONDS = 7 * 24 * 3600.0


def lkgp_key(combo: str) -> str:
    """The state-store key of a combo's last-known-good target."""
    return f"lkgp:{combo}"


class LastKnownGoodRecorder:
    """Remembers, per combo of the strategies that read it (``lkgp``, ``auto``), the provider
    and connection that answered last: ``{"provider", "connection"}``."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    async def record(self, target: Target, outcome: Outcome, context: AttemptContext) -> None:
        combo = context.plan.combo
        if combo is None or not outcome.ok or context.plan.strategy not in LKGP_STRATEGIES:
            return
        good: Json = {"provider": target.provider.slug, "connection": target.connection.id}
        await self.store.set(lkgp_key(combo), good, ttl=LKGP_TTL_SECONDS)
