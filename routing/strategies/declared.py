"""The declared-order family (pure): ``priority``, ``fill-first`` and ``context-relay`` try the
combo's targets in the order the combo declares them (priority's fallback-only steps wait in
``routing.proxy.guards.fallback_only``; context-relay's handoff is
``routing.strategies.context_relay``)."""

from __future__ import annotations

from collections.abc import Sequence

from omniroute.core.store import StateStore
from routing.domain.plan.planning import Target
from routing.strategies.request import Ordered, OrderRequest


def declared(targets: Sequence[Target]) -> tuple[Target, ...]:
    """Priority / fill-first: the declared order, unchanged."""
    return tuple(targets)


async def keep_order(request: OrderRequest, store: StateStore) -> Ordered | None:
    """The declared-order strategies' orderer: the plan stays as it is."""
    return None
