"""The resilience gauges of ``/metrics``, read from the state store when Prometheus scrapes.

Breakers by state, cooling and terminal connections, locked models and queue depths are not
counted as they change: the state store already holds them (shared by every process when it
is Redis), so a scrape reads them once. Queue depths are this process's own (the admission
gates live in process memory). A scrape that cannot read the store still answers, without
these gauges, and logs why.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from omniroute.core.state import get_store
from omniroute.core.store import StateStore
from resilience.api.health import admission_counts
from resilience.domain.breaker.state import BreakerState
from resilience.domain.connection_state import ConnectionState
from resilience.services.breakers import breaker_list
from resilience.services.connections import CONNECTION_PREFIX
from resilience.services.lockout_operations import lockout_list

__all__ = ["ResilienceCollector", "ResilienceCounts", "resilience_counts"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ResilienceCounts:
    """What the gauges report, read in one pass over the store."""

    breakers: dict[str, int] = field(default_factory=dict)  # by state
    cooling: int = 0
    terminal: int = 0
    locked_models: int = 0


async def resilience_counts(store: StateStore) -> ResilienceCounts:
    """Breakers by state, cooling and terminal connections and active model locks, now."""
    breakers = {state.value: 0 for state in BreakerState}
    for breaker in (await breaker_list(store=store)).values():
        breakers[breaker.state.value] += 1
    now = store.clock()
    states = [
        ConnectionState.from_dict(raw)
        for raw in (await store.scan(CONNECTION_PREFIX)).values()
        if isinstance(raw, dict)
    ]
    terminal = sum(1 for state in states if state.is_terminal)
    cooling = sum(1 for state in states if not state.is_terminal and state.remaining(now) > 0)
    locks = await lockout_list(store=store)
    return ResilienceCounts(breakers, cooling, terminal, len(locks))


class ResilienceCollector(Collector):
    """A ``prometheus_client`` collector of the gauges above (plus queue depths)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            counts = async_to_sync(resilience_counts)(get_store())
        except Exception:
            logger.exception("reading the state store for /metrics failed")
        else:
            yield from _state_families(counts)
        yield _queue_family(admission_counts())

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())  # collected fresh at every scrape, never at registration


def _state_families(counts: ResilienceCounts) -> Iterator[GaugeMetricFamily]:
    breakers = GaugeMetricFamily(
        "omniroute_breakers", "Provider circuit breakers by state.", labels=["state"]
    )
    for state, count in counts.breakers.items():
        breakers.add_metric([state], count)
    yield breakers
    yield GaugeMetricFamily(
        "omniroute_cooling_connections",
        "Connections in a cooldown now (not counting terminal ones).",
        value=counts.cooling,
    )
    yield GaugeMetricFamily(
        "omniroute_terminal_connections",
        "Connections in a terminal state (banned, expired, out of credits).",
        value=counts.terminal,
    )
    yield GaugeMetricFamily(
        "omniroute_locked_models",
        "Active model locks, over every connection.",
        value=counts.locked_models,
    )


def _queue_family(admission: dict[str, Any]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "omniroute_queue_depth",
        "Requests waiting in this process's admission gates and request queues.",
        labels=["kind", "name"],
    )
    for gate in admission.get("gates", []):
        family.add_metric(["gate", str(gate["gate"])], gate["queued"])
    for queue in admission.get("queues", []):
        family.add_metric(["queue", str(queue["queue"])], queue["queued"])
    return family
