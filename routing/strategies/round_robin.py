"""The ``round-robin`` strategy: the declared order rotated, one turn per request."""

from __future__ import annotations

from collections.abc import Sequence

from omniroute.core.store import StateStore
from routing.domain.plan.planning import Target
from routing.strategies.request import COUNTER_TTL_SECONDS, Ordered, OrderRequest


def round_robin(targets: Sequence[Target], counter: int) -> tuple[Target, ...]:
    """Round-robin: the declared order rotated to start at ``counter mod N`` and wrap around.

    ``counter`` is the caller's count of this combo's requests so far (0 for the first)."""
    if not targets:
        return ()
    start = counter % len(targets)
    return (*targets[start:], *targets[:start])


async def order_round_robin(request: OrderRequest, store: StateStore) -> Ordered:
    """``round-robin``: the rotation starts at the combo's request counter in the state store
    (shared by every process), each member keeping ``stickyRoundRobinLimit`` requests."""
    plan = request.plan
    counter = await store.incr(f"round-robin:{plan.combo}", ttl=COUNTER_TTL_SECONDS)
    turn = (counter - 1) // max(1, request.options.sticky_round_robin_limit)
    return Ordered(round_robin(plan.targets, turn))
