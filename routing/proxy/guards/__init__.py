"""The resilience layers as the attempt loop sees them: eligibility filters and recorders."""

from __future__ import annotations

from omniroute.core.store import StateStore
from routing.proxy.guards.admission import ConcurrencyHolder, RequestQueueHolder
from routing.proxy.guards.attribution import AttributionRecorder
from routing.proxy.guards.breaker import BreakerFilter
from routing.proxy.guards.combo_metrics import ComboMetricsRecorder, LastKnownGoodRecorder
from routing.proxy.guards.connection import ConnectionFilter
from routing.proxy.guards.egress import EgressRecorder
from routing.proxy.guards.fallback_only import FallbackOnlyFilter
from routing.proxy.guards.lease import LeaseBindingFilter, LeaseFenceHolder
from routing.proxy.guards.lockout import ModelLockoutFilter
from routing.proxy.guards.quota import QuotaRecorder
from routing.proxy.guards.tool_limit import ToolLimitFilter, ToolLimitRecorder
from routing.proxy.guards.window_gate import WindowGateFilter, WindowGateRecorder
from routing.proxy.seams import EligibilityFilter, Holder, OutcomeRecorder


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
    return (RequestQueueHolder(store), ConcurrencyHolder(store), LeaseFenceHolder())


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
