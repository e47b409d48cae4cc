"""The ``auto`` combo strategy's step: gather what the gateway
knows of each target, let the pure scoring decide (``routing.strategies.auto.scoring``), keep its
exclusions, and hand back the order.

What it reads, all from the state store and concurrently (nothing from the database):

* per target: the combo's metrics (``routing.proxy.guards.combo_metrics``: requests, successes and
  the mean latency; no p95 is kept, so the mean stands in for it), its auto exclusion record,
  its learnt tool limit when the request declares tools (``routing.proxy.guards.tool_limit``), and
  the requests in flight on its connection when the connection has a concurrency cap;
* per connection: its quota snapshot (``routing.proxy.guards.quota``), as of now: the share used
  and the time to its reset;
* per provider: its breaker, refreshed to now (an OPEN breaker whose cooldown has passed reads
  as HALF_OPEN, as the breaker filter will see it);
* per combo: the last-known-good record ``lkgp:<combo>``, ``{"provider", "connection"}``,
  which ranks that target first in the ``lkgp`` mode and marks its connection's prompt cache
  as warm. A missing or malformed record is no record.

The model catalog gives the prices and context windows, the configuration snapshot the combo's
steps; the request's headers its mode and budget (``routing.strategies.auto.request``), its body
its size. Exclusions last at most ``availability.transientCooldownCapMs``.

The combo's options give the mode (``mode``; a request's ``X-OmniRoute-Mode`` header wins),
custom ``weights`` and the ``explorationRate``.

The order returned is the decision's, then the targets excluded for a low score (availability
first: a poor target is still better than no answer once the others failed), then those whose
provider breaker is OPEN: the breaker filter skips them without a call and explains them in
the answer (a 503 ``provider_circuit_open`` when nothing else could serve). Targets over the
client's budget are left out.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Mapping
from typing import Any

from omniroute.core.store import Json, StateStore
from resilience.services.breakers import breaker_get
from routing.domain.config.combo_options import DEFAULT_OPTIONS
from routing.domain.plan.planning import Target
from routing.domain.quota.snapshots import QuotaSnapshot, quota_key
from routing.proxy.admission.gates import _PREFIX as GATE_PREFIX  # the gates' semaphore keys
from routing.proxy.guards.admission import connection_gate
from routing.proxy.guards.combo_metrics import lkgp_key, metrics_key
from routing.proxy.guards.tool_limit import _key as tool_limit_key  # where the limit is learnt
from routing.strategies import sources
from routing.strategies.auto.exclusion import ExclusionRecord, capped_policy
from routing.strategies.auto.factors import AutoSignals, build_candidates
from routing.strategies.auto.request import (
    MODE_ALIASES,
    AutoMode,
    parse_auto_headers,
    request_profile,
)
from routing.strategies.auto.scoring import (
    CIRCUIT_OPEN,
    LOW_SCORE,
    AutoDecision,
    LastKnownGood,
    auto_order,
)
from routing.strategies.keys import execution_key
from routing.strategies.request import Ordered, OrderRequest, Planned

EXCLUSION_PREFIX = "auto-exclusion:"
EXCLUSION_MEMORY_SECONDS = 3600.0  # how long a level is remembered after its exclusion ends


def exclusion_key(combo: str, key: str) -> str:
    """The store key of the auto exclusion of execution key ``key`` in ``combo``."""
    return f"{EXCLUSION_PREFIX}{combo}:{key}"


async def order_auto(request: OrderRequest, store: StateStore) -> Ordered:
    """The ``auto`` strategy's orderer (its headers: the request's)."""
    given = request.header_map()
    return Ordered(await auto_targets(request, store, given, payload=request.payload))


async def auto_targets(
    context: Planned,
    store: StateStore,
    headers: Mapping[str, str],
    *,
    payload: Mapping[str, Any] | None = None,
) -> tuple[Target, ...]:
    """The targets of ``context.plan`` (an ``auto`` combo; ``context``: the request's
    context or its ``OrderRequest``) in the order to try them: the
    decision's order, then the targets whose provider breaker is OPEN (see the module
    docstring). Raises as :func:`auto_decision` does."""
    decision = await auto_decision(context, store, headers, payload=payload)
    poor = tuple(e.target for e in decision.excluded if e.reason == LOW_SCORE)
    opened = tuple(e.target for e in decision.excluded if e.reason == CIRCUIT_OPEN)
    return decision.ordered + poor + opened


async def auto_decision(
    context: Planned,
    store: StateStore,
    headers: Mapping[str, str],
    *,
    payload: Mapping[str, Any] | None = None,
) -> AutoDecision:
    """The whole decision for one request (for a caller that also reports the exclusions,
    the scores or an exploration); its exclusion records are stored.

    ``headers``: the request's (names in any case); ``payload``: its body, for its size (without
    it the request counts as empty, capped at the default output estimate). Raises
    ``GatewayError``: 400 for a malformed ``X-OmniRoute-*`` header (before any store read),
    402 ``budget_exceeded`` for a strict budget no target fits."""
    options = parse_auto_headers(headers)
    combo = context.plan.combo or context.plan.requested_model
    now = store.clock()
    signals, lkg = await _gather(context, store, combo, now)
    request = request_profile(payload or {}, context.facts.tools)
    info = context.facts.snapshot.combos.get(context.plan.combo or "")
    settings = info.options if info is not None else DEFAULT_OPTIONS
    decision = auto_order(
        build_candidates(signals, request),
        settings.weight_map,
        options.mode or MODE_ALIASES.get(settings.mode, AutoMode.RULES),
        sources.auto_rng,
        now=now,
        policy=capped_policy(context.facts.snapshot.availability.transient_cap_seconds),
        budget=options.budget,
        lkg=lkg,
        exploration_rate=settings.exploration_rate,
    )
    await _keep_records(store, combo, decision, now)
    return decision


async def _keep_records(store: StateStore, combo: str, decision: AutoDecision, now: float) -> None:
    writes: list[Awaitable[object]] = []
    for key, record in decision.records.items():
        if record is None:
            writes.append(store.delete(exclusion_key(combo, key)))
            continue
        ttl = max(record.until - now, 0.0) + EXCLUSION_MEMORY_SECONDS
        writes.append(store.set(exclusion_key(combo, key), record.to_dict(), ttl=ttl))
    await asyncio.gather(*writes)


async def _gather(
    context: Planned, store: StateStore, combo: str, now: float
) -> tuple[list[AutoSignals], LastKnownGood | None]:
    targets = context.plan.targets
    slugs = sorted({t.provider.slug for t in targets})
    connections = sorted({t.connection.id for t in targets})
    breakers, quotas, lkg_raw, raw = await asyncio.gather(
        asyncio.gather(*(_breaker(context, store, slug, now) for slug in slugs)),
        asyncio.gather(*(_quota(store, cid, now) for cid in connections)),
        store.get(lkgp_key(combo)),
        asyncio.gather(*(_target_records(context, store, combo, t) for t in targets)),
    )
    lkg = _last_known_good(lkg_raw)
    by_slug = dict(zip(slugs, breakers, strict=True))
    by_connection = dict(zip(connections, quotas, strict=True))
    signals = [
        _signals(context, t, records, by_slug[t.provider.slug], by_connection[t.connection.id], lkg)
        for t, records in zip(targets, raw, strict=True)
    ]
    return signals, lkg


async def _breaker(context: Planned, store: StateStore, slug: str, now: float) -> str:
    policy = context.facts.snapshot.breaker_policy(slug)
    return (await breaker_get(store=store, name=slug)).refreshed(policy, now).state.value


async def _quota(store: StateStore, connection_id: int, now: float) -> tuple[float | None, ...]:
    """(the fraction used, the seconds to its reset), each ``None`` when unknown; a window
    whose reset has passed since the reading counts as unused."""
    snapshot = QuotaSnapshot.from_record(await store.get(quota_key(connection_id)))
    if snapshot is None:
        return None, None
    current = snapshot.as_of(now)
    reset_at = current.reset_at
    return current.percent_used, (max(reset_at - now, 0.0) if reset_at is not None else None)


async def _target_records(
    context: Planned, store: StateStore, combo: str, target: Target
) -> tuple[Json | None, Json | None, Json | None, int | None]:
    """The target's metrics, exclusion and tool-limit records and its connection's load."""
    cap = target.connection.max_concurrent or target.connection.overrides.max_concurrent
    metrics, exclusion, limit, load = await asyncio.gather(
        store.get(metrics_key(combo, target)),
        store.get(exclusion_key(combo, execution_key(target))),
        store.get(tool_limit_key(target)) if context.facts.tools else _none(),
        store.semaphore_count(GATE_PREFIX + connection_gate(target.connection.id))
        if cap
        else _none(),
    )
    return metrics, exclusion, limit, load


async def _none() -> None:
    return None


def _signals(
    context: Planned,
    target: Target,
    records: tuple[Json | None, Json | None, Json | None, int | None],
    breaker: str,
    quota: tuple[float | None, ...],
    lkg: LastKnownGood | None,
) -> AutoSignals:
    metrics, exclusion, limit, load = records
    metrics = metrics if isinstance(metrics, dict) else {}
    entry = context.facts.snapshot.catalog_entry(target.provider.slug, target.model)
    combo = context.facts.snapshot.combos.get(context.plan.combo or "")
    step = combo.steps[target.step] if combo and target.step < len(combo.steps) else None
    connection = target.connection
    return AutoSignals(
        target,
        steps=len(combo.steps) if combo else max(t.step for t in context.plan.targets) + 1,
        pinned=step is not None and step.connection_id == connection.id,
        requests=_count(metrics.get("count")),
        successes=_count(metrics.get("ok")),
        mean_latency_ms=_number(metrics.get("latency_ms")),
        breaker=breaker,
        quota_used=quota[0],
        quota_reset_in_seconds=quota[1],
        input_price=entry.input_price_per_mtok if entry else None,
        output_price=entry.output_price_per_mtok if entry else None,
        context_window=entry.context_window if entry else None,
        tool_limit=limit if isinstance(limit, int) and not isinstance(limit, bool) else None,
        in_flight=load,
        max_concurrent=connection.max_concurrent or connection.overrides.max_concurrent or None,
        cache_warm=None if lkg is None else _is_lkg(target, lkg),
        exclusion=ExclusionRecord.from_dict(exclusion),
    )


def _is_lkg(target: Target, lkg: LastKnownGood) -> bool:
    return target.provider.slug == lkg.provider and str(target.connection.id) == lkg.connection


def _last_known_good(raw: Json | None) -> LastKnownGood | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("provider"), str):
        return None
    connection = raw.get("connection")
    valid = isinstance(connection, str | int) and not isinstance(connection, bool)
    return LastKnownGood(str(raw["provider"]), str(connection) if valid else None)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
