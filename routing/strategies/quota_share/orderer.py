"""The ``quota-share`` orderer: weighted DRR over the targets whose connection has room, P2C on
the requests in flight, demoting a connection at its cap (``max_concurrent``, or its
``maxConcurrent`` override) unless ``quotaShareConcurrencyLimit.enabled`` is off.

The winner's connection counts one request in flight (this process's
``sources.quota_share_state``) until the request ends: the orderer hands back the slot's
release as what to settle. The cap itself is held by the account semaphores, for every
strategy (``routing.proxy.guards.admission``); a quota-share dispatch whose slot wait fails (a
full queue, a timeout) goes ahead without a slot (fail-open) while the limit is enabled.
"""

from __future__ import annotations

from omniroute.core.store import StateStore
from routing.domain.plan.planning import Target
from routing.strategies import sources
from routing.strategies.quota_share.drr import Slot, select_quota_share_target
from routing.strategies.request import Ordered, OrderRequest, Settle


async def order_quota_share(request: OrderRequest, store: StateStore) -> Ordered:
    """The targets in DRR order, the winner's in-flight slot released when the request ends."""
    plan = request.plan
    selection = select_quota_share_target(
        plan.targets,
        combo=plan.combo or "",
        model=plan.requested_model,
        now=sources.clock(),
        state=sources.quota_share_state,
        weights=request.weights(),
        caps=_caps(request),
    )
    slot = selection.slot
    return Ordered(selection.ordered, _release(slot) if slot is not None else None)


def _caps(request: OrderRequest) -> dict[int, int | None]:
    """Each connection's concurrency cap; None for all while the limit is disabled."""
    enabled = request.snapshot.quota_share.enabled
    return {
        t.connection.id: (
            (t.connection.max_concurrent or t.connection.overrides.max_concurrent or None)
            if enabled
            else None
        )
        for t in request.plan.targets
    }


def _release(slot: Slot) -> Settle:
    def release(answered: Target | None) -> None:
        slot.release()

    return release
