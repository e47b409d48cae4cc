"""The resilience layers as the attempt loop sees them: eligibility filters and recorders."""

from __future__ import annotations

from resilience.store import StateStore
from routing.attempts import EligibilityFilter, OutcomeRecorder
from routing.guards.admission import ConcurrencyHolder, RequestQueueHolder
from routing.guards.attribution import AttributionRecorder
from routing.guards.breaker import BreakerFilter
from routing.guards.combo_metrics import ComboMetricsRecorder, LastKnownGoodRecorder
from routing.guards.connection import ConnectionFilter
from routing.guards.egress import EgressRecorder
from routing.guards.fallback_only import FallbackOnlyFilter
from routing.guards.lease import LeaseBindingFilter, LeaseFenceHolder
from routing.guards.lockout import ModelLockoutFilter
from routing.guards.quota import QuotaRecorder
from routing.guards.tool_limit import ToolLimitFilter, ToolLimitRecorder
from routing.guards.window_gate import WindowGateFilter, WindowGateRecorder
from routing.seams import Holder


def default_filters(store: StateStore) -> tuple[EligibilityFilter, ...]:
    """Filters in the order they run; the breaker last, since it may take a probe slot."""
    return (
        FallbackOnlyFilter(),
        LeaseBindingFilter(),
        ToolLimitFilter(store),
        ConnectionFilter(store),
        ModelLockoutFilter(store),
        WindowGateFilter(store),
        BreakerFilter(store),
    )


def default_holders(store: StateStore) -> tuple[Holder, ...]:
    """Holders in the order they acquire: the request queue first (its admission refuses
    before anything else is held), then the account semaphores, and the lease fence last, so
    that a managed request's lease is checked after every wait, right before dispatch."""
    return (RequestQueueHolder(), ConcurrencyHolder(store), LeaseFenceHolder())


def default_recorders(store: StateStore) -> tuple[OutcomeRecorder, ...]:
    """Recorders in the order they run."""
    # The attribution recorder charges the failure; the others read its verdict: keep it first.
    return (
        AttributionRecorder(store),
        EgressRecorder(store),
        WindowGateRecorder(store),
        ToolLimitRecorder(store),
        ComboMetricsRecorder(store),
        LastKnownGoodRecorder(store),
        QuotaRecorder(store),
    )
