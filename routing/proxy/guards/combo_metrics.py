"""Per-target signals of combos, in the state store: how many requests each target of a combo
served, how many succeeded, and its latency (an exponentially weighted mean). ``least-used``
and ``p2c`` read them (``routing.strategies.metrics``); single-model requests keep none. And the
target that answered last, for the strategies that start from it (``lkgp``, ``auto``).

One record per (combo, execution key) for :data:`METRICS_TTL_SECONDS` after its last update.
"""

from __future__ import annotations

import time
from typing import Any

from omniroute.core.store import Json, StateStore
from routing.domain.attempts.outcomes import Outcome
from routing.domain.config.vocabulary import Strategy
from routing.domain.plan.planning import Target
from routing.proxy.context import AttemptContext
from routing.strategies.quota_share import execution_key

METRICS_TTL_SECONDS = 7 * 24 * 3600.0
LATENCY_WEIGHT = 0.2  # of the newest sample in the mean
# One sample moves the mean at most this far: a sample is counted as at most
# SPIKE_FACTOR x the mean plus SPIKE_SLACK_MS. A single pause of the machine (a garbage
# collection, a busy neighbour) must not make a healthy target look slow to p2c, while a target
# that stays slow still reaches its real latency within a few requests (+60 % a request).
SPIKE_FACTOR = 4.0
SPIKE_SLACK_MS = 10.0
_PREFIX = "combo-metrics:"


def metrics_key(combo: str, target: Target) -> str:
    return f"{_PREFIX}{combo}:{execution_key(target)}"


def updated(current: Any, ok: bool, latency_ms: int, now: float | None = None) -> dict[str, Any]:
    """A record with one more request, made at ``now`` (epoch seconds) (pure).

    Every success is a latency sample, 0 ms included: a fast local upstream answers within the
    millisecond, and a target whose samples were all dropped would have no latency while its
    peers had one, which p2c reads as a difference (it once let one target run two requests
    ahead of the others)."""
    record = current if isinstance(current, dict) else {}
    count = int(record.get("count", 0)) + 1
    succeeded = int(record.get("ok", 0)) + (1 if ok else 0)
    mean = record.get("latency_ms")
    if ok and latency_ms >= 0:
        mean = float(latency_ms) if mean is None else _moved(float(mean), latency_ms)
    record = {"count": count, "ok": succeeded, "latency_ms": mean}
    return record if now is None else {**record, "at": now}


def _moved(mean: float, sample: float) -> float:
    """The mean after one more sample, the sample capped against spikes."""
    capped = min(sample, mean * SPIKE_FACTOR + SPIKE_SLACK_MS)
    return mean + LATENCY_WEIGHT * (capped - mean)


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
            metrics_key(combo, target),
            lambda current: updated(current, ok, latency, now),
            ttl=METRICS_TTL_SECONDS,
        )


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
