"""The strategy step: a combo's targets ordered per request, as its strategy says (the attempt
loop's strategy seam).

The orderer comes from ``routing.strategies.registry``; it sees the request through a frozen
``OrderRequest`` and answers with the order and, for the strategies that keep state until the
request ends (weighted's sticky step, quota-share's in-flight slot), what to settle then.
Only this step touches the request's context: it writes the plan and registers the settling
as a finisher, given the target that answered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from omniroute.core.store import StateStore
from routing.proxy.context import AttemptContext
from routing.proxy.seams import answered_target
from routing.strategies.registry import orderer_for
from routing.strategies.request import OrderRequest, Settle


async def order_targets(
    context: AttemptContext,
    store: StateStore,
    payload: Mapping[str, Any] | None = None,
    headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    """Order ``context.plan``'s targets for this request, as its combo's strategy says
    (``payload``: the client's body, ``headers``: its headers as ASGI gives them)."""
    plan = context.plan
    orderer = orderer_for(plan.strategy)
    if plan.combo is None or len(plan.targets) < 2 or orderer is None:
        return
    request = OrderRequest(plan, context.facts, payload, tuple(headers))
    ordered = await orderer(request, store)
    if ordered is None:
        return
    context.plan = replace(plan, targets=ordered.targets)
    if ordered.settle is not None:
        _settle_at_finish(context, ordered.settle)


def _settle_at_finish(context: AttemptContext, settle: Settle) -> None:
    context.on_finish.append(lambda: settle(answered_target(context)))
