"""The strategies that rank by the model catalog: ``cost-optimized`` (the input price,
cheapest first, unknown last) and ``context-optimized`` (the context window, largest first,
unknown as 0)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from omniroute.core.store import StateStore
from routing.domain.plan.planning import Target
from routing.strategies.request import Ordered, OrderRequest


def cost_ordered(
    targets: Sequence[Target], price_of: Callable[[Target], float | None]
) -> tuple[Target, ...]:
    """Cost-optimized: ascending by ``price_of(target)``, the model's input price per million
    tokens; unknown (``None`` or NaN) sorts as +inf. Stable: equal prices (the same model on
    several connections) keep their declared order."""

    def price(target: Target) -> float:
        value = price_of(target)
        return math.inf if value is None or math.isnan(value) else value

    return tuple(sorted(targets, key=price))


def context_optimized(
    targets: Sequence[Target], context_window: Callable[[Target], int | None]
) -> tuple[Target, ...]:
    """Context-optimized: descending by ``context_window(target)``, the model's context window
    in tokens (unknown, ``None``, sorts as 0); stable. When no target's window is known, the
    declared order is kept."""
    windows = [context_window(t) for t in targets]
    if all(w is None for w in windows):
        return tuple(targets)
    order = sorted(range(len(targets)), key=lambda i: -(windows[i] or 0))
    return tuple(targets[i] for i in order)


async def order_cost(request: OrderRequest, store: StateStore) -> Ordered:
    """``cost-optimized``: the catalog's input price, cheapest first."""

    def price(target: Target) -> float | None:
        entry = request.snapshot.catalog_entry(target.provider.slug, target.model)
        return entry.input_price_per_mtok if entry is not None else None

    return Ordered(cost_ordered(request.plan.targets, price))


async def order_context(request: OrderRequest, store: StateStore) -> Ordered:
    """``context-optimized``: the catalog's context window, largest first."""

    def window(target: Target) -> int | None:
        entry = request.snapshot.catalog_entry(target.provider.slug, target.model)
        return entry.context_window if entry is not None else None

    return Ordered(context_optimized(request.plan.targets, window))
