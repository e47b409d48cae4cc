"""Admission as the attempt loop's holders (reference-part2 §3, §5; decisions 10 and 21).

* :class:`ConcurrencyHolder`: the account semaphores. A connection's ``max_concurrent`` (or
  its ``maxConcurrent`` override), the model's ``modelConcurrency`` override, the provider's
  ``max_concurrent`` and ``requestQueue.globalConcurrentRequests`` are gates acquired together,
  FIFO; a full queue (``SEMAPHORE_QUEUE_FULL``, 429) or a wait past ``SEMAPHORE_WAIT_SECONDS``
  (``SEMAPHORE_TIMEOUT``, 503) refuses the attempt, and the loop tries the next target; a
  quota-share dispatch goes ahead without the slot instead (fail-open, §3.3) while
  ``quotaShareConcurrencyLimit.enabled``.
  A round-robin combo with ``memberConcurrency`` adds a gate per member (§3.5); a member
  that refuses passes the request to the next one.
* :class:`RequestQueueHolder`: the local request queue of a connection with rate-limit
  protection (or of every API-key connection with ``requestQueue.autoEnableApiKeyProviders``):
  admission by queue depth before anything else (``RATE_LIMIT_QUEUE_FULL``, 429), then a wait
  for its turn; the hold bounds the dispatch by ``maxWaitMs`` (``RATE_LIMIT_EXECUTION_TIMEOUT``,
  504, failed over like a timeout).

Every refusal is local and request-scoped: never recorded against a connection, a model or a
breaker (decision 21).
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

from resilience.domain.request_queue import RequestQueueSettings
from resilience.store import StateStore
from routing.admission.gates import NO_HOLD, QUEUE_FULL, GateRefused, Gates, Requirement
from routing.admission.limiter import Limiter, LimiterPolicy
from routing.attempts import AttemptContext
from routing.domain.admission import QUEUE_FULL as RATE_LIMIT_QUEUE_FULL
from routing.domain.admission import check_queue_admission
from routing.domain.planning import Target
from routing.domain.quota_share import execution_key
from routing.domain.vocabulary import ProviderCategory, Strategy
from routing.seams import Held, HoldRefused

logger = logging.getLogger(__name__)

SEMAPHORE_WAIT_SECONDS = 30.0  # reference-part2 §3.4's default timeout
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


def member_requirement(target: Target, context: AttemptContext) -> Requirement | None:
    """A round-robin combo's gate per member (§3.5), with ``memberConcurrency`` set: the
    connection's own cap if it has one, else that option (``None``: no such gate)."""
    plan = context.plan
    combo = context.snapshot.combos.get(plan.combo or "")
    cap = combo.options.member_concurrency if combo is not None else 0
    if plan.strategy != Strategy.ROUND_ROBIN or not cap:
        return None
    key = f"rr:{plan.combo}:{execution_key(target)}"
    return (key, target.connection.max_concurrent or cap)


class ConcurrencyHolder:
    """Holds a slot on each of the target's capped gates while the attempt runs."""

    def __init__(self, store: StateStore, gates: Gates | None = None) -> None:
        self.gates = gates or Gates(store)
        _live.add(self)

    async def acquire(self, target: Target, context: AttemptContext) -> Held:
        items = gate_requirements(target, context.snapshot.request_queue)
        member = member_requirement(target, context)
        if member is not None:
            items.append(member)
        # Two attempts of one request may run at once (a hedge): each holds its own slots.
        holder = (
            f"{context.request_id}:{len(context.attempts)}:{target.connection.id}:{target.model}"
        )
        try:
            return await self.gates.acquire(
                items, holder=holder,
                wait_seconds=SEMAPHORE_WAIT_SECONDS, max_queue=SEMAPHORE_MAX_QUEUE,
            )  # fmt: skip
        except GateRefused as refused:
            if _fails_open(context):
                logger.warning(
                    "request %s: quota-share proceeds without a slot (%s on %s)",
                    context.request_id, refused.code, refused.key,
                )  # fmt: skip
                return NO_HOLD
            status = 429 if refused.code == QUEUE_FULL else 503
            raise HoldRefused(status, refused.code, refused.message, retry_after=1) from None


def _fails_open(context: AttemptContext) -> bool:
    """A quota-share dispatch whose slot wait failed goes ahead without one (§3.3)."""
    return context.plan.strategy == Strategy.QUOTA_SHARE and context.snapshot.quota_share.enabled


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
    """The local request queue of each protected connection (one limiter per process)."""

    def __init__(self) -> None:
        self.limiters: dict[str, Limiter] = {}
        _live.add(self)

    async def acquire(self, target: Target, context: AttemptContext) -> Held:
        queue = context.snapshot.request_queue
        if not queued_connection(target, queue):
            return NO_HOLD
        key = f"{target.provider.slug}:{target.connection.id}"
        policy = queue_policy(target, queue)
        limiter = self.limiters.get(key)
        if limiter is None:
            limiter = self.limiters[key] = Limiter(policy)
        else:
            limiter.update(policy)
        refusal = check_queue_admission(limiter.queued, queue.max_queue_depth, target.label)
        if refusal is not None:
            raise HoldRefused(429, RATE_LIMIT_QUEUE_FULL, refusal, retry_after=1)
        max_wait_ms = target.connection.overrides.max_wait_ms or queue.max_wait_ms
        return await limiter.schedule(execution_seconds=max_wait_ms / 1000)

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
                {"gate": key, "running": s.running, "queued": s.queued, "cap": s.cap,
                 "blocked": s.blocked_until is not None}
                for key, s in holder.gates.stats().items()
            ]  # fmt: skip
        else:
            queues += [
                {"queue": key, "running": running, "queued": queued}
                for key, (running, queued) in holder.stats().items()
            ]
    return {"gates": gates, "queues": queues}
