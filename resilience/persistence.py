"""Write-through of breaker and connection state to the database (best effort, in order).

The writes are queued on the gateway's background writes (``omniroute.core.tasks``): in the
order they were made, on Django's single sync thread. Most never hold up the request that
caused them; the durable ones (a breaker opening, a terminal state, an upstream-hinted
cooldown) are awaited before the answer is returned. A failed write is logged and dropped: the
state store stays authoritative while the process lives. Breakers are ours
(``domain_circuit_breakers``); connection rows belong to routing, which hands in the writer
(``resilience.hooks``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from typing import Any

from omniroute.core.tasks import write_in_background
from resilience.domain.breaker.machine import Breaker, BreakerPolicy
from resilience.domain.connection_state import ConnectionState
from resilience.hooks import hooks

logger = logging.getLogger(__name__)


def policy_to_dict(policy: BreakerPolicy) -> dict[str, Any]:
    """The policy numbers stored beside a breaker, so readers can compute its retry-after."""
    return {
        "failureThreshold": policy.failure_threshold,
        "resetTimeout": policy.reset_timeout,
        "halfOpenRequests": policy.half_open_requests,
        "degradationThreshold": policy.effective_degradation_threshold,
        "maxBackoffMultiplier": policy.max_backoff_multiplier,
        "backoffEscalationCount": policy.backoff_escalation_count,
        "cooldownByKind": dict(policy.cooldown_by_kind),
        "windowMs": round(policy.window * 1000),
        "minimumCalls": policy.minimum_calls,
        "failureRatePercent": policy.failure_rate_percent,
    }


def policy_from_dict(data: Any) -> BreakerPolicy:
    """The policy stored by ``policy_to_dict``; the defaults when absent or malformed."""
    if not isinstance(data, dict):
        return BreakerPolicy()
    try:
        return BreakerPolicy(
            failure_threshold=int(data["failureThreshold"]),
            reset_timeout=float(data["resetTimeout"]),
            half_open_requests=int(data["halfOpenRequests"]),
            degradation_threshold=int(data["degradationThreshold"]),
            max_backoff_multiplier=int(data["maxBackoffMultiplier"]),
            backoff_escalation_count=int(data["backoffEscalationCount"]),
            cooldown_by_kind=dict(data.get("cooldownByKind") or {}),
            window=int(data.get("windowMs", 60_000)) / 1000,
            minimum_calls=int(data.get("minimumCalls", 10)),
            failure_rate_percent=int(data.get("failureRatePercent", 50)),
        )
    except (KeyError, TypeError, ValueError):
        return BreakerPolicy()


def _save_row(name: str, data: dict[str, Any]) -> None:
    from resilience.models import CircuitBreaker

    breaker = Breaker.from_dict(data)
    last = breaker.last_failure_at
    CircuitBreaker.objects.update_or_create(
        name=name,
        defaults={
            "state": breaker.state.value,
            "failure_count": breaker.failure_count,
            "last_failure_time": dt.datetime.fromtimestamp(last, dt.UTC) if last else None,
            "options": data,
        },
    )


def _delete_row(name: str) -> None:
    from resilience.models import CircuitBreaker

    CircuitBreaker.objects.filter(name=name).delete()


def persist_breaker(
    name: str, breaker: Breaker, policy: BreakerPolicy | None
) -> asyncio.Task[None]:
    """Queue the write of ``breaker``'s current state (with its policy, when known). Await the
    task for a write that must land before the answer (an opening)."""
    data = breaker.to_dict()
    if policy is not None:
        data["policy"] = policy_to_dict(policy)
    return write_in_background(_save_row, name, data)


def persist_breaker_deleted(name: str) -> None:
    """Queue the deletion of ``name``'s row."""
    write_in_background(_delete_row, name)


def _save_connection_state(connection_id: int, data: dict[str, Any]) -> None:
    writer = hooks().connection_writer  # routing's: it owns the connection rows
    if writer is None:
        logger.warning(
            "no connection writer registered: connection %s not persisted", connection_id
        )
        return
    writer(connection_id, ConnectionState.from_dict(data))


def persist_connection_state(connection_id: int, state: ConnectionState) -> asyncio.Task[None]:
    """Queue the write of a connection's cooldown and error columns. Await the task for a write
    that must land before the answer (terminal states, hinted cooldowns)."""
    return write_in_background(_save_connection_state, connection_id, state.to_dict())


def persisted_breakers() -> dict[str, dict[str, Any]]:
    """Every persisted breaker as stored (sync; for the cold-start restore)."""
    from resilience.models import CircuitBreaker

    return {row.name: dict(row.options or {}) for row in CircuitBreaker.objects.all()}


def _save_lock_row(provider: str, connection_id: int, record: dict[str, Any], until: float) -> None:
    from resilience.models import ModelLockRecord

    ModelLockRecord.objects.update_or_create(
        provider=provider,
        connection_id=connection_id,
        defaults={"record": record, "expires_at": dt.datetime.fromtimestamp(until, dt.UTC)},
    )


def _delete_lock_row(provider: str, connection_id: int) -> None:
    from resilience.models import ModelLockRecord

    ModelLockRecord.objects.filter(provider=provider, connection_id=connection_id).delete()


def _delete_lock_rows() -> None:
    from resilience.models import ModelLockRecord

    ModelLockRecord.objects.all().delete()


def persist_lock_record(
    provider: str, connection_id: int, record: dict[str, Any] | None, until: float
) -> asyncio.Task[None]:
    """Queue the write of a connection's lock record (``None``: its deletion), live until
    ``until``. Await the task for a lock that must be durable before the answer (an
    upstream-hinted one)."""
    if record is None:
        return write_in_background(_delete_lock_row, provider, connection_id)
    return write_in_background(_save_lock_row, provider, connection_id, record, until)


def persist_lock_records_cleared() -> asyncio.Task[None]:
    """Queue the deletion of every lock record's row."""
    return write_in_background(_delete_lock_rows)


def persisted_lock_records(now: float) -> dict[tuple[str, int], dict[str, Any]]:
    """Every lock record with something live at ``now``, by (provider, connection); the rest
    of the rows are deleted (sync; for the restore)."""
    from resilience.models import ModelLockRecord

    moment = dt.datetime.fromtimestamp(now, dt.UTC)
    ModelLockRecord.objects.filter(expires_at__lte=moment).delete()
    rows = ModelLockRecord.objects.all()
    return {(row.provider, row.connection_id): dict(row.record or {}) for row in rows}
