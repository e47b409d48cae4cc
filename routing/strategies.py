"""Strategy steps: a combo's targets ordered per request (the attempt loop's strategy seam).

``priority`` keeps the plan's order. ``quota-share`` (reference-part2 §3.2) orders by weighted
DRR over the targets whose connection has room, P2C on the requests in flight, demoting a
connection at its cap (``max_concurrent``, or its ``maxConcurrent`` override) unless
``quotaShareConcurrencyLimit.enabled`` is off; the winner's connection counts one request in
flight until the request ends. The cap itself is held by the account semaphores, for every
strategy (``routing.guards.admission``); a quota-share dispatch whose slot wait fails (a full
queue, a timeout) goes ahead without a slot (§3.3's fail-open) while the limit is enabled.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from routing.attempts import AttemptContext
from routing.domain.quota_share import QuotaShareState, select_quota_share_target
from routing.domain.vocabulary import Strategy

quota_share_state = QuotaShareState()  # this process's deficits and in-flight slots
clock: Callable[[], float] = time.monotonic


def order_targets(context: AttemptContext) -> None:
    """Order ``context.plan``'s targets for this request, as its strategy says."""
    plan = context.plan
    if plan.strategy != Strategy.QUOTA_SHARE or plan.combo is None or len(plan.targets) < 2:
        return
    combo = context.snapshot.combos.get(plan.combo)
    weights = [combo.steps[t.step].weight if combo else 1 for t in plan.targets]
    caps: dict[int, int | None] = {
        t.connection.id: (
            (t.connection.max_concurrent or t.connection.overrides.max_concurrent or None)
            if context.snapshot.quota_share.enabled
            else None
        )
        for t in plan.targets
    }
    selection = select_quota_share_target(
        plan.targets, combo=plan.combo, model=plan.requested_model, now=clock(),
        state=quota_share_state, weights=weights, caps=caps,
    )  # fmt: skip
    context.plan = replace(plan, targets=selection.ordered)
    if selection.slot is not None:
        context.on_finish.append(selection.slot.release)
