"""The per-provider gauges of ``/metrics``, read when Prometheus scrapes (registered with the
gateway's metrics registry, ``omniroute.core.observability.metrics``, at start-up).

For every configured provider: its breaker's state (``omniroute_breaker_state``, one series per
state, 1 for the current one), its connections by state (``omniroute_provider_connections``:
available, cooling, terminal), its locked models (``omniroute_provider_locked_models``) and its
active leases (``omniroute_leases_active``). The providers and connections come from the
configuration snapshot, the states from the state store (one scan each), the leases from one
query: the scrape pays for them, never a request. A scrape that cannot read them still answers,
without these gauges, and logs why.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from asgiref.sync import async_to_sync
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from leases.interface import lease_list_active
from omniroute.core.state import get_store
from omniroute.core.store import StateStore
from resilience.domain.breaker.state import BreakerState
from resilience.domain.connection_state import ConnectionState
from resilience.services.breakers import breaker_list
from resilience.services.connections import CONNECTION_PREFIX, connection_key
from resilience.services.lockout_operations import lockout_list
from routing.snapshot import current_snapshot

__all__ = ["CONNECTION_STATES", "ProviderCollector", "ProviderCounts", "provider_counts"]

logger = logging.getLogger(__name__)

CONNECTION_STATES = ("available", "cooling", "terminal")
LEASES_COUNTED = 100_000  # far above any real number of active leases


@dataclass(frozen=True, slots=True)
class ProviderCounts:
    """What the per-provider gauges report, by provider slug."""

    breakers: dict[str, str] = field(default_factory=dict)  # the breaker's state
    connections: dict[str, dict[str, int]] = field(default_factory=dict)  # by state
    locked_models: dict[str, int] = field(default_factory=dict)
    leases: dict[str, int] = field(default_factory=dict)


async def provider_counts(store: StateStore) -> ProviderCounts:
    """The configured providers' breakers, connections by state and locked models, now."""
    snapshot = await current_snapshot()
    breakers = await breaker_list(store=store)
    raw_states = await store.scan(CONNECTION_PREFIX)
    now = store.clock()
    connections: dict[str, dict[str, int]] = {}
    for slug in snapshot.providers:
        counts = dict.fromkeys(CONNECTION_STATES, 0)
        for connection in snapshot.connections_for(slug):
            raw = raw_states.get(connection_key(connection.id))
            state = ConnectionState.from_dict(raw) if isinstance(raw, dict) else None
            if state is not None and state.is_terminal:
                counts["terminal"] += 1
            elif state is not None and state.remaining(now) > 0:
                counts["cooling"] += 1
            else:
                counts["available"] += 1
        connections[slug] = counts
    locked = Counter(lock.provider for lock in await lockout_list(store=store))
    return ProviderCounts(
        breakers={
            slug: breakers[slug].state.value if slug in breakers else BreakerState.CLOSED.value
            for slug in snapshot.providers
        },
        connections=connections,
        locked_models={slug: locked.get(slug, 0) for slug in snapshot.providers},
    )


def active_leases() -> dict[str, int]:
    """Active leases by provider (one query)."""
    return dict(Counter(lease.provider for lease in lease_list_active(limit=LEASES_COUNTED)))


class ProviderCollector(Collector):
    """A ``prometheus_client`` collector of the gauges above."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            counts = async_to_sync(provider_counts)(get_store())
        except Exception:
            logger.exception("reading the providers' state for /metrics failed")
        else:
            yield from provider_families(counts)
        try:
            leases = active_leases()
        except Exception:
            logger.exception("counting the active leases for /metrics failed")
        else:
            yield lease_family(leases)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())  # collected fresh at every scrape, never at registration


def provider_families(counts: ProviderCounts) -> Iterator[GaugeMetricFamily]:
    breaker = GaugeMetricFamily(
        "omniroute_breaker_state",
        "A provider's circuit breaker: 1 for its current state, 0 for the others.",
        labels=["provider", "state"],
    )
    for slug, current in counts.breakers.items():
        for state in BreakerState:
            breaker.add_metric([slug, state.value], 1 if state.value == current else 0)
    yield breaker
    connections = GaugeMetricFamily(
        "omniroute_provider_connections",
        "A provider's connections by state (available, cooling, terminal).",
        labels=["provider", "state"],
    )
    for slug, by_state in counts.connections.items():
        for name, count in by_state.items():
            connections.add_metric([slug, name], count)
    yield connections
    locked = GaugeMetricFamily(
        "omniroute_provider_locked_models",
        "Active model locks on a provider's connections.",
        labels=["provider"],
    )
    for slug, count in counts.locked_models.items():
        locked.add_metric([slug], count)
    yield locked


def lease_family(leases: dict[str, int]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "omniroute_leases_active",
        "Active exclusive connection leases, by provider.",
        labels=["provider"],
    )
    for slug, count in sorted(leases.items()):
        family.add_metric([slug], count)
    return family
