"""Routing's side of the lease API: the access it installs for leases at start-up.

The lease API (``leases.api``) asks routing which key a request presents, which connections
may serve a model for that key and how those connections are doing; leases may not import
routing, so :func:`install_lease_access` hands it :func:`lease_routing_access` from routing's
app ``ready`` (``leases.interface``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from leases.interface import KeyRefusal, LeaseCandidate, RoutingAccess, install
from resilience.domain.connection_state import ConnectionState
from routing.domain.config.auth import presented_key
from routing.domain.config.keys import hash_key
from routing.domain.config.snapshot import ConfigSnapshot, KeyInfo
from routing.lease_routes import acquire_candidates, check_lease_model
from routing.selectors import connection_names, connection_states_over
from routing.snapshot import current_snapshot


@dataclass(frozen=True, slots=True)
class SnapshotKeyRouting:
    """Routing's answers about one authenticated key, from one configuration snapshot."""

    snapshot: ConfigSnapshot
    key: KeyInfo

    def check_model(self, model: str) -> None:
        """503 ``LEASE_SERVICE_UNAVAILABLE`` for a model that does not resolve, the proxy's own
        403 ``model_not_allowed`` for one the key may not use."""
        check_lease_model(self.snapshot, self.key, model)

    def candidates(self, model: str) -> tuple[LeaseCandidate, ...]:
        """The connections an acquire of ``model`` may bind, in the model's plan order."""
        return tuple(
            LeaseCandidate(t.connection.id, t.provider.slug, t.connection.state)
            for t in acquire_candidates(self.snapshot, self.key, model)
        )

    def display_names(self, provider: str, connection_id: int) -> tuple[str | None, str]:
        """The connection's configured name (an inactive one's from its row) and its
        provider's display name (the slug when the provider is gone)."""
        return _connection_name(self.snapshot, provider, connection_id), _provider_name(
            self.snapshot, provider
        )


def _connection_name(snapshot: ConfigSnapshot, provider: str, connection_id: int) -> str | None:
    for connection in snapshot.connections_for(provider):
        if connection.id == connection_id:
            return connection.name
    return connection_names([connection_id]).get(connection_id)  # an inactive one


def _provider_name(snapshot: ConfigSnapshot, slug: str) -> str:
    provider = snapshot.providers.get(slug)
    return provider.name if provider is not None else slug


async def authenticate(
    headers: Iterable[tuple[bytes, bytes]], now: datetime
) -> SnapshotKeyRouting | KeyRefusal:
    """The key ``headers`` present, against the current snapshot: none presented, or not one
    that authenticates at ``now``, is a refusal."""
    snapshot = await current_snapshot()
    presented = presented_key(headers)
    if presented is None:
        return KeyRefusal.MISSING
    key = snapshot.keys_by_hash.get(hash_key(presented))
    if key is None or not key.is_usable(now):
        return KeyRefusal.INVALID
    return SnapshotKeyRouting(snapshot, key)


def connection_states(durable: Mapping[int, ConnectionState]) -> Mapping[int, ConnectionState]:
    """Each connection's live state over its durable one (sync callers only)."""
    return connection_states_over(dict(durable))


def lease_routing_access() -> RoutingAccess:
    """What routing hands leases."""
    return RoutingAccess(
        authenticate=authenticate,
        connection_states=connection_states,
        connection_names=connection_names,
    )


def install_lease_access() -> None:
    """Install routing's access for leases (routing's app ``ready``)."""
    install(lease_routing_access())
