"""Admission as the attempt loop's holders.

* :class:`ConcurrencyHolder`: the account semaphores. A connection's ``max_concurrent`` (or
  its ``maxConcurrent`` override), the model's ``modelConcurrency`` override, the provider's
  ``max_concurrent`` and ``requestQueue.globalConcurrentRequests`` are gates acquired together,
  FIFO; a full queue (``SEMAPHORE_QUEUE_FULL``, 429) or a wait past ``SEMAPHORE_WAIT_SECONDS``
  (``SEMAPHORE_TIMEOUT``, 503) refuses the attempt, and the loop tries the next target; a
  quota-share dispatch goes ahead without the slot instead (fail-open) while
  ``quotaShareConcurrencyLimit.enabled``.
  A round-robin combo with ``memberConcurrency`` adds a gate per member; a member
  that refuses passes the request to the next one.
* :class:`RequestQueueHolder`: the request queue of a connection with rate-limit
  protection (or of every API-key connection with ``requestQueue.autoEnableApiKeyProviders``):
  admission by queue depth before anything else (``RATE_LIMIT_QUEUE_FULL``, 429), then a wait
  for its turn (its rate, spacing and concurrency hold across processes through the store);
  the hold bounds the dispatch by ``maxWaitMs`` (``RATE_LIMIT_EXECUTION_TIMEOUT``, 504, failed
  over like a timeout).

Every refusal is local and request-scoped: never recorded against a connection, a model or a
breaker.
"""

from __future__ import annotations

import logging
import time
import weakref
from typing import Any

from omniroute.core.observability.metrics import observe_admission_wait
from omniroute.core.store import StateStore
from resilience.domain.request_queue import RequestQueueSettings
from routing.domain.attempts.admission import QUEUE_FULL as RATE_LIMIT_QUEUE_FULL
from routing.domain.attempts.admission import check_queue_admission
from routing.domain.config.snapshot import ConfigSnapshot
from routing.domain.config.vocabulary import ProviderCategory, Strategy
from routing.domain.plan.planning import Target
from routing.proxy.admission.gates import (
    NO_HOLD,
    QUEUE_FULL,
    GateRefused,
    Gates,
    Requirement,
    requirements,
)
from routing.proxy.admission.limiter import Limiter, LimiterPolicy
from routing.proxy.context import AttemptContext
from routing.proxy.seams import Held, HoldRefused
from routing.proxy.snapshot_memo import TargetMemo
from routing.strategies.quota_share import execution_key

logger = logging.getLogger(__name__)

SEMAPHORE_WAIT_SECONDS = 30.0  # the reference's default semaphore timeout
SEMAPHORE_MAX_QUEUE = 20  # and its default queue size
GLOBAL_GATE = "global"


def connection_gate(connection_id: int) -> str:
    return f"conn:{connection_id}"


def model_gate(connection_id: int, model: str) -> str:
    return f"conn:{connection_id}:model:{model}"


def provider_gate(slug: str) -> str:
    return f"provider:{slug}"


def gate_requirements(target: Target, queue: RequestQueueSettings) -> list[Requirement]:
    """The gates an attempt on ``target`` must pass (caps of None or 0 do not apply)."""
    connection = target.connection
    overrides = connection.overrides
    return [
        (connection_gate(connection.id), connection.max_concurrent or overrides.max_concurrent),
        (model_gate(connection.id, target.model), overrides.model_cap(target.model)),
        (provider_gate(target.provider.slug), target.provider.max_concurrent),
        (GLOBAL_GATE, queue.global_concurrent_requests),
    ]


def _gate_caps(target: Target, snapshot: ConfigSnapshot) -> dict[str, int]:
    return requirements(gate_requirements(target, snapshot.request_queue))


gate_caps = TargetMemo(_gate_caps)
"""The caps of ``target``'s own gates that apply (``gate_requirements``), once per snapshot and
target: they read nothing else. Not to be changed by the caller."""


def member_requirement(target: Target, context: AttemptContext) -> Requirement | None:
    """A round-robin combo's gate per member, with ``memberConcurrency`` set: the
    connection's own cap if it has one, else that option (``None``: no such gate)."""
    plan = context.plan
    if plan.strategy != Strategy.ROUND_ROBIN:  # most requests: no combo lookup
        return None
    combo = context.facts.snapshot.combos.get(plan.combo or "")
    cap = combo.options.member_concurrency if combo is not None else 0
    if not cap:
        return None
    key = f"rr:{plan.combo}:{execution_key(target)}"
    return (key, target.connection.max_concurrent or cap)


class ConcurrencyHolder:
    """Holds a slot on each of the target's capped gates while the attempt runs."""

    def __init__(self, store: StateStore, gates: Gates | None = None) -> None:
        self.gates = gates or Gates(store)
        _live.add(self)

    def applies(self, target: Target, context: AttemptContext) -> bool:
        return bool(self._caps(target, context))

    async def acquire(self, target: Target, context: AttemptContext) -> Held:
        caps = self._caps(target, context)
        if not caps:  # no cap applies: no gate to pass, no wait to observe
            return NO_HOLD
        # Two attempts of one request may run at once (a hedge): each holds its own slots.
        request, tried = context.facts.request_id, len(context.loop.attempts)
        holder = f"{request}:{tried}:{target.connection.id}:{target.model}"
        started = time.monotonic()
        try:
            return await self.gates.acquire(
                list(caps.items()),
                holder=holder,
                wait_seconds=SEMAPHORE_WAIT_SECONDS,
                max_queue=SEMAPHORE_MAX_QUEUE,
            )
        except GateRefused as refused:
            if _fails_open(context):
                logger.warning(
                    "request %s: quota-share proceeds without a slot (%s on %s)",
                    context.facts.request_id,
                    refused.code,
                    refused.key,
                )
                return NO_HOLD
            status = 429 if refused.code == QUEUE_FULL else 503
            raise HoldRefused(status, refused.code, refused.message, retry_after=1) from None
        finally:
            observe_admission_wait("gate", target.provider.slug, time.monotonic() - started)

    @staticmethod
    def _caps(target: Target, context: AttemptContext) -> dict[str, int]:
        caps = gate_caps(target, context.facts.snapshot)
        member = member_requirement(target, context)
        if member is None:
            return caps
        return requirements([*caps.items(), member])


def _fails_open(context: AttemptContext) -> bool:
    """A quota-share dispatch whose slot wait failed goes ahead without one."""
    return (
        context.plan.strategy == Strategy.QUOTA_SHARE and context.facts.snapshot.quota_share.enabled
    )


def queue_policy(target: Target, queue: RequestQueueSettings) -> LimiterPolicy:
    """A connection's limiter: the settings, with its non-zero overrides."""
    overrides = target.connection.overrides
    return LimiterPolicy(
        max_concurrent=overrides.max_concurrent or queue.concurrent_requests,
        min_time_seconds=(overrides.min_time_ms or queue.min_time_between_requests_ms) / 1000,
        per_minute=overrides.rpm or queue.requests_per_minute,
    )


def queued_connection(target: Target, queue: RequestQueueSettings) -> bool:
    """Whether ``target``'s connection goes through the local request queue."""
    if target.connection.rate_limit_protection:
        return True
    return (
        queue.auto_enable_api_key_providers and target.provider.category == ProviderCategory.API_KEY
    )


class RequestQueueHolder:
    """The request queue of each protected connection: one limiter per process, its limits
    shared through ``store``."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.limiters: dict[str, Limiter] = {}
        _live.add(self)

    def applies(self, target: Target, context: AttemptContext) -> bool:
        return queued_connection(target, context.facts.snapshot.request_queue)

    async def acquire(self, target: Target, context: AttemptContext) -> Held:
        queue = context.facts.snapshot.request_queue
        if not queued_connection(target, queue):
            return NO_HOLD
        key = f"{target.provider.slug}:{target.connection.id}"
        policy = queue_policy(target, queue)
        limiter = self.limiters.get(key)
        if limiter is None:
            limiter = self.limiters[key] = Limiter(policy, self.store, key=key)
        else:
            limiter.update(policy)
        refusal = check_queue_admission(limiter.queued, queue.max_queue_depth, target.label)
        if refusal is not None:
            raise HoldRefused(429, RATE_LIMIT_QUEUE_FULL, refusal, retry_after=1)
        max_wait_ms = target.connection.overrides.max_wait_ms or queue.max_wait_ms
        started = time.monotonic()
        try:
            return await limiter.schedule(execution_seconds=max_wait_ms / 1000)
        finally:
            observe_admission_wait("queue", target.provider.slug, time.monotonic() - started)

    def stats(self) -> dict[str, tuple[int, int]]:
        """Running and queued requests per limiter."""
        return {key: (lim.running, lim.queued) for key, lim in self.limiters.items()}


_live: weakref.WeakSet[ConcurrencyHolder | RequestQueueHolder] = weakref.WeakSet()


def admission_stats() -> dict[str, Any]:
    """This process's gates and request queues: what runs and what waits (the health
    payload's ``admission``)."""
    gates: list[dict[str, Any]] = []
    queues: list[dict[str, Any]] = []
    for holder in list(_live):
        if isinstance(holder, ConcurrencyHolder):
            gates += [
                {
                    "gate": key,
                    "running": s.running,
                    "queued": s.queued,
                    "cap": s.cap,
                    "blocked": s.blocked_until is not None,
                }
                for key, s in holder.gates.stats().items()
            ]
        else:
            queues += [
                {"queue": key, "running": running, "queued": queued}
                for key, (running, queued) in holder.stats().items()
            ]
    return {"gates": gates, "queues": queues}
