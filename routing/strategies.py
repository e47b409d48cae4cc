"""Strategy steps: a combo's targets ordered per request (the attempt loop's strategy seam).

The orderings are pure (``routing.domain.ordering``, ``reset_ordering``, ``cache_affinity``,
``quota_share``, ``auto_*``); this module feeds them the request's signals and keeps their
state:

* ``priority``, ``fill-first``, ``context-relay``: the declared order (priority's fallback-only
  steps wait in ``routing.guards.fallback_only``; context-relay's handoff is
  ``routing.context_relay``);
* ``random``: a fresh shuffle; ``strict-random``: a shuffled deck per combo, drawn without
  replacement (this process's);
* ``weighted``: one step drawn by its weight, the rest by descending weight, the drawn step kept
  for ``stickyWeightedLimit`` successes (``routing.sticky``);
* ``round-robin``: a rotation whose start is the combo's request counter in the state store
  (shared by every process), each member keeping ``stickyRoundRobinLimit`` requests;
* ``least-used``, ``p2c``: the combo's per-target request counts, success rates and latencies
  (``routing.guards.combo_metrics``, in the state store); the provider breaker's state is not
  read here (an open breaker's targets are excluded by its filter anyway);
* ``cost-optimized``: the model catalog's input price (unknown last);
* ``context-optimized``: the catalog's context window (largest first, unknown as 0);
* ``lkgp``: the combo's last-known-good provider and connection first;
* ``cache-optimized``: rendezvous hashing of the prompt's cache key over the accounts (no key:
  the declared order);
* ``reset-aware``, ``reset-window``, ``headroom``: the accounts' quota snapshots
  (``routing.quota_strategies``);
* ``auto``: the weighted multi-factor score (``routing.auto``);
* ``quota-share`` (reference-part2 §3.2): weighted DRR over the targets whose connection has
  room, P2C on the requests in flight, demoting a connection at its cap (``max_concurrent``, or
  its ``maxConcurrent`` override) unless ``quotaShareConcurrencyLimit.enabled`` is off; the
  winner's connection counts one request in flight until the request ends. The cap itself is
  held by the account semaphores, for every strategy (``routing.guards.admission``); a
  quota-share dispatch whose slot wait fails (a full queue, a timeout) goes ahead without a
  slot (§3.3's fail-open) while the limit is enabled.

``fusion`` and ``pipeline`` are not orderings: their preludes run before the dispatch.
Random sources and the clock are module attributes so that tests can fix them.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from resilience.store import StateStore
from routing import sticky
from routing.attempts import AttemptContext
from routing.auto import auto_targets
from routing.domain import ordering
from routing.domain.cache_affinity import prompt_cache_key, rendezvous, target_identity
from routing.domain.combo_options import DEFAULT_OPTIONS, ComboOptions
from routing.domain.planning import Target
from routing.domain.quota_share import (
    QuotaShareState,
    execution_key,
    select_quota_share_target,
)
from routing.domain.vocabulary import Strategy
from routing.guards.combo_metrics import lkgp_key, metrics_key
from routing.quota_strategies import QUOTA_STRATEGIES, quota_ordered

quota_share_state = QuotaShareState()  # this process's deficits and in-flight slots
decks: dict[str, ordering.Deck] = {}  # strict-random's deck per combo, this process's
clock: Callable[[], float] = time.monotonic
wall_clock: Callable[[], float] = time.time  # epoch seconds, as the metrics records
rng: random.Random = random.Random()
COUNTER_TTL_SECONDS = 24 * 3600.0
MAX_DECKS = 200


async def order_targets(
    context: AttemptContext,
    store: StateStore,
    payload: Mapping[str, Any] | None = None,
    headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    """Order ``context.plan``'s targets for this request, as its combo's strategy says
    (``payload``: the client's body, ``headers``: its headers as ASGI gives them)."""
    plan = context.plan
    if plan.combo is None or len(plan.targets) < 2:
        return
    strategy, targets = plan.strategy, plan.targets
    if strategy == Strategy.QUOTA_SHARE:
        _quota_share(context)
        return
    options = _options(context)
    ordered: Sequence[Target]
    if strategy == Strategy.RANDOM:
        ordered = ordering.shuffled(targets, rng)
    elif strategy == Strategy.STRICT_RANDOM:
        ordered = ordering.strict_random(targets, _deck(plan.combo), rng)
    elif strategy == Strategy.WEIGHTED:
        ordered = await sticky.weighted(context, store, _weights(context, per_step=True), rng)
    elif strategy == Strategy.ROUND_ROBIN:
        counter = await store.incr(f"round-robin:{plan.combo}", ttl=COUNTER_TTL_SECONDS)
        turn = (counter - 1) // max(1, options.sticky_round_robin_limit)
        ordered = ordering.round_robin(targets, turn)
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
    elif strategy == Strategy.LKGP:
        provider, connection = _last_known_good(await store.get(lkgp_key(plan.combo)))
        ordered = ordering.last_known_good(targets, provider, connection)
    elif strategy == Strategy.CONTEXT_OPTIMIZED:
        ordered = ordering.context_optimized(targets, lambda t: _context_window(context, t))
    elif strategy == Strategy.CACHE_OPTIMIZED:
        key = prompt_cache_key(payload or {})
        if key is None:
            return
        ordered = rendezvous(targets, key, lambda t: target_identity(t, targets))
    elif strategy in QUOTA_STRATEGIES:
        ordered = await quota_ordered(context, store, options)
    elif strategy == Strategy.AUTO:
        given = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers}
        ordered = await auto_targets(context, store, given, payload=payload)
    else:  # priority, fill-first, context-relay: the declared order
        return
    context.plan = replace(plan, targets=tuple(ordered))


def _options(context: AttemptContext) -> ComboOptions:
    combo = context.snapshot.combos.get(context.plan.combo or "")
    return combo.options if combo is not None else DEFAULT_OPTIONS


def _last_known_good(record: object) -> tuple[str | None, int | None]:
    """The (provider, connection) of an ``lkgp:<combo>`` record; ``None`` where it is unusable."""
    if not isinstance(record, dict):
        return None, None
    provider, connection = record.get("provider"), record.get("connection")
    return (
        provider if isinstance(provider, str) else None,
        connection if isinstance(connection, int) else None,
    )


def _context_window(context: AttemptContext, target: Target) -> int | None:
    entry = context.snapshot.catalog_entry(target.provider.slug, target.model)
    return entry.context_window if entry is not None else None


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
    latency_ms = float(latency) if latency is not None else None
    at = record.get("at")
    age = wall_clock() - float(at) if isinstance(at, int | float) else None
    return ordering.TargetMetrics(rate, latency_ms, count=count, age_seconds=age)


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
