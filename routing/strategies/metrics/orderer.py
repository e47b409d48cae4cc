"""The orderers of ``least-used``, ``p2c`` and ``lkgp``: they read the combo's per-target
records in the state store (``routing.proxy.guards.combo_metrics``: request counts, successes,
latencies, the last-known-good target) and hand them to the pure orderings
(``routing.strategies.metrics.orders``). The provider breaker's state is not read here: an
open breaker's targets are excluded by its filter anyway."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from omniroute.core.store import StateStore
from routing.domain.plan.planning import Target
from routing.proxy.guards.combo_metrics import lkgp_key, metrics_key
from routing.strategies import sources
from routing.strategies.keys import execution_key
from routing.strategies.metrics.orders import TargetMetrics, last_known_good, least_used, p2c
from routing.strategies.request import Ordered, OrderRequest


async def order_least_used(request: OrderRequest, store: StateStore) -> Ordered:
    """``least-used``: the fewest requests served for the combo first."""
    records = await _records(store, request.plan.combo or "", request.plan.targets)
    counts = {key: int(record.get("count", 0)) for key, record in records.items()}
    return Ordered(least_used(request.plan.targets, counts))


async def order_p2c(request: OrderRequest, store: StateStore) -> Ordered:
    """``p2c``: the better of two random picks first, by success rate and latency."""
    records = await _records(store, request.plan.combo or "", request.plan.targets)
    metrics = {key: _target_metrics(record) for key, record in records.items()}
    return Ordered(p2c(request.plan.targets, sources.rng, metrics))


async def order_lkgp(request: OrderRequest, store: StateStore) -> Ordered:
    """``lkgp``: the combo's last-known-good provider and connection first."""
    plan = request.plan
    provider, connection = _last_known_good(await store.get(lkgp_key(plan.combo or "")))
    return Ordered(last_known_good(plan.targets, provider, connection))


async def _records(
    store: StateStore, combo: str, targets: Sequence[Target]
) -> dict[str, dict[str, Any]]:
    records: dict[str, dict[str, Any]] = {}
    for target in targets:
        record = await store.get(metrics_key(combo, target))
        if isinstance(record, dict):
            records[execution_key(target)] = record
    return records


def _target_metrics(record: dict[str, Any]) -> TargetMetrics:
    count = int(record.get("count", 0))
    rate = 100.0 * int(record.get("ok", 0)) / count if count else None
    latency = record.get("latency_ms")
    latency_ms = float(latency) if latency is not None else None
    at = record.get("at")
    age = sources.wall_clock() - float(at) if isinstance(at, int | float) else None
    return TargetMetrics(rate, latency_ms, count=count, age_seconds=age)


def _last_known_good(record: object) -> tuple[str | None, int | None]:
    """The (provider, connection) of an ``lkgp:<combo>`` record; ``None`` where it is unusable."""
    if not isinstance(record, dict):
        return None, None
    provider, connection = record.get("provider"), record.get("connection")
    return (
        provider if isinstance(provider, str) else None,
        connection if isinstance(connection, int) else None,
    )
