"""Strategy steps: a combo's targets ordered per request (the attempt loop's strategy seam).

The orderings are pure (``routing.domain.ordering``, ``routing.domain.quota_share``); this
module feeds them the request's signals and keeps their state:

* ``priority``, ``fill-first``: the declared order;
* ``random``: a fresh shuffle; ``strict-random``: a shuffled deck per combo, drawn without
  replacement (this process's);
* ``weighted``: one step drawn by its weight, the rest by descending weight;
* ``round-robin``: a rotation whose start is the combo's request counter in the state store
  (shared by every process);
* ``least-used``, ``p2c``: the combo's per-target request counts, success rates and latencies
  (``routing.guards.combo_metrics``, in the state store); the provider breaker's state is not
  read here (an open breaker's targets are excluded by its filter anyway);
* ``cost-optimized``: the model catalog's input price (unknown last);
* ``quota-share`` (reference-part2 §3.2): weighted DRR over the targets whose connection has
  room, P2C on the requests in flight, demoting a connection at its cap (``max_concurrent``, or
  its ``maxConcurrent`` override) unless ``quotaShareConcurrencyLimit.enabled`` is off; the
  winner's connection counts one request in flight until the request ends. The cap itself is
  held by the account semaphores, for every strategy (``routing.guards.admission``); a
  quota-share dispatch whose slot wait fails (a full queue, a timeout) goes ahead without a
  slot (§3.3's fail-open) while the limit is enabled.

Random sources and the clock are module attributes so that tests can fix them.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from resilience.store import StateStore
from routing.attempts import AttemptContext
from routing.domain import ordering
from routing.domain.planning import Target
from routing.domain.quota_share import (
    QuotaShareState,
    execution_key,
    select_quota_share_target,
)
from routing.domain.vocabulary import Strategy
from routing.guards.combo_metrics import metrics_key

quota_share_state = QuotaShareState()  # this process's deficits and in-flight slots
decks: dict[str, ordering.Deck] = {}  # strict-random's deck per combo, this process's
clock: Callable[[], float] = time.monotonic
rng: random.Random = random.Random()
COUNTER_TTL_SECONDS = 24 * 3600.0
MAX_DECKS = 200


async def order_targets(context: AttemptContext, store: StateStore) -> None:
    """Order ``context.plan``'s targets for this request, as its combo's strategy says."""
    plan = context.plan
    if plan.combo is None or len(plan.targets) < 2:
        return
    strategy, targets = plan.strategy, plan.targets
    if strategy == Strategy.QUOTA_SHARE:
        _quota_share(context)
        return
    ordered: Sequence[Target]
    if strategy == Strategy.RANDOM:
        ordered = ordering.shuffled(targets, rng)
    elif strategy == Strategy.STRICT_RANDOM:
        ordered = ordering.strict_random(targets, _deck(plan.combo), rng)
    elif strategy == Strategy.WEIGHTED:
        ordered = ordering.weighted(targets, _weights(context, per_step=True), rng)
    elif strategy == Strategy.ROUND_ROBIN:
        counter = await store.incr(f"round-robin:{plan.combo}", ttl=COUNTER_TTL_SECONDS)
        ordered = ordering.round_robin(targets, counter - 1)
    elif strategy == Strategy.LEAST_USED:
        records = await _metrics(store, plan.combo, targets)
        counts = {key: int(record.get("count", 0)) for key, record in records.items()}
        ordered = ordering.least_used(targets, counts)
    elif strategy == Strategy.P2C:
        records = await _metrics(store, plan.combo, targets)
        metrics = {key: _target_metrics(record) for key, record in records.items()}
        ordered = ordering.p2c(targets, rng, metrics)
    elif strategy == Strategy.COST_OPTIMIZED:
        ordered = ordering.cost_ordered(targets, lambda t: _price(context, t))
    else:  # priority, fill-first: the declared order
        return
    context.plan = replace(plan, targets=tuple(ordered))


def _weights(context: AttemptContext, *, per_step: bool = False) -> list[float]:
    """Each target's combo-step weight; ``per_step``: shared by the step's targets, so that a
    step is drawn by its weight however many connections it expands to."""
    targets = context.plan.targets
    combo = context.snapshot.combos.get(context.plan.combo or "")
    sizes = Counter(t.step for t in targets) if per_step else None
    return [
        (float(combo.steps[t.step].weight) if combo else 1.0) / (sizes[t.step] if sizes else 1)
        for t in targets
    ]


def _deck(combo: str) -> ordering.Deck:
    deck = decks.get(combo)
    if deck is None:
        if len(decks) >= MAX_DECKS:
            decks.pop(next(iter(decks)))
        deck = decks[combo] = ordering.Deck()
    return deck


def _price(context: AttemptContext, target: Target) -> float | None:
    entry = context.snapshot.catalog_entry(target.provider.slug, target.model)
    return entry.input_price_per_mtok if entry is not None else None


async def _metrics(
    store: StateStore, combo: str, targets: Sequence[Target]
) -> dict[str, dict[str, Any]]:
    records: dict[str, dict[str, Any]] = {}
    for target in targets:
        record = await store.get(metrics_key(combo, target))
        if isinstance(record, dict):
            records[execution_key(target)] = record
    return records


def _target_metrics(record: dict[str, Any]) -> ordering.TargetMetrics:
    count = int(record.get("count", 0))
    rate = 100.0 * int(record.get("ok", 0)) / count if count else None
    latency = record.get("latency_ms")
    return ordering.TargetMetrics(rate, float(latency) if latency is not None else None)


def _quota_share(context: AttemptContext) -> None:
    plan = context.plan
    weights = _weights(context)
    caps: dict[int, int | None] = {
        t.connection.id: (
            (t.connection.max_concurrent or t.connection.overrides.max_concurrent or None)
            if context.snapshot.quota_share.enabled
            else None
        )
        for t in plan.targets
    }
    selection = select_quota_share_target(
        plan.targets, combo=plan.combo or "", model=plan.requested_model, now=clock(),
        state=quota_share_state, weights=weights, caps=caps,
    )  # fmt: skip
    context.plan = replace(plan, targets=selection.ordered)
    if selection.slot is not None:
        context.on_finish.append(selection.slot.release)
