"""The one module of ``leases`` the rest of the product imports (``leases.urls`` aside).

What routing's proxy, its key and connection services and the dashboard use of leases, and the
access routing fills at start-up so that leases never imports routing (``leases.access``):

- the managed request: :class:`LeaseClaim` (read by :func:`lease_claim`), the route check
  (:class:`RouteShape`, :func:`check_route_shape`), the binding (:func:`lease_binding`,
  :func:`leased_targets`) and the fence before each attempt (:func:`lease_fence_or_move`,
  :func:`transition_reason`, :func:`distinct_connections`, :class:`LeaseOutcome`,
  :func:`retry_after_seconds`);
- the errors the proxy answers with: :class:`LeaseCode`, :data:`LEASE_ERROR_TYPE`,
  :func:`lease_error`, :func:`capacity_unavailable`;
- the ends of leases when a key or a connection changes: :class:`EndReason`,
  :func:`leases_invalidate_for_key`, :func:`leases_invalidate_for_connection`;
- what the dashboard reads: :func:`lease_list_active`, :class:`LeaseView`;
- routing's side of the lease API: :class:`RoutingAccess` with :class:`KeyRouting`,
  :class:`KeyRefusal` and :class:`LeaseCandidate`, :func:`install` (from routing's app
  ``ready``), :func:`routing_access` and, for tests, :func:`replaced_routing_access`; the key
  and targets leases reads through :class:`LeaseKey` and :class:`LeaseTarget`.
"""

from __future__ import annotations

from leases.access import (
    KeyRefusal,
    KeyRouting,
    LeaseCandidate,
    RoutingAccess,
    install,
    replaced_routing_access,
    routing_access,
)
from leases.domain.claims import (
    LeaseClaim,
    LeaseKey,
    LeaseTarget,
    RouteShape,
    check_route_shape,
    distinct_connections,
    lease_claim,
    leased_targets,
    transition_reason,
)
from leases.domain.errors import LEASE_ERROR_TYPE, LeaseCode, capacity_unavailable, lease_error
from leases.domain.states import EndReason, LeaseOutcome
from leases.domain.tokens import retry_after_seconds
from leases.managed import lease_binding, lease_fence_or_move
from leases.selectors import lease_list_active
from leases.services import (
    LeaseView,
    leases_invalidate_for_connection,
    leases_invalidate_for_key,
)

__all__ = [
    "LEASE_ERROR_TYPE",
    "EndReason",
    "KeyRefusal",
    "KeyRouting",
    "LeaseCandidate",
    "LeaseClaim",
    "LeaseCode",
    "LeaseKey",
    "LeaseOutcome",
    "LeaseTarget",
    "LeaseView",
    "RouteShape",
    "RoutingAccess",
    "capacity_unavailable",
    "check_route_shape",
    "distinct_connections",
    "install",
    "lease_binding",
    "lease_claim",
    "lease_error",
    "lease_fence_or_move",
    "lease_list_active",
    "leased_targets",
    "leases_invalidate_for_connection",
    "leases_invalidate_for_key",
    "replaced_routing_access",
    "retry_after_seconds",
    "routing_access",
    "transition_reason",
]
