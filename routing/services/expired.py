"""Re-checks of expired OAuth connections.

An ``expired`` connection of an OAuth provider is probed up to ``EXPIRED_RETRY_MAX`` times.
A success clears it to active (``connection_clear_error``: row and live state); a failure
counts and schedules the next re-check 5, 10, then 20 minutes later. After the last failed
re-check it stays expired until an operator resets it or its credentials change.

Sync ORM and a blocking probe: run it from a thread (the management command, or the
resilience housekeeping's background task, which runs ``expired_recheck_pass_now`` every minute
once ``RoutingConfig.ready`` has registered it). Several gateway processes
may run passes at once: each re-check first claims the connection with a compare-and-set on
its retry fields, so only one process probes it per due time and no failure is counted twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

import httpx
from django.db.models import Q, QuerySet
from django.utils import timezone

from routing.domain.config.vocabulary import ProviderCategory, TestStatus, WireFormat
from routing.models import ProviderConnection
from routing.services.connections import connection_clear_error

logger = logging.getLogger(__name__)

EXPIRED_RETRY_MAX = 3
EXPIRED_RETRY_BACKOFF = timedelta(minutes=5)  # doubled after each failed re-check
# A claimed re-check is due again after this if its process died mid-probe.
EXPIRED_CLAIM = timedelta(minutes=2)
PROBE_TIMEOUT_SECONDS = 5.0
ANTHROPIC_VERSION = "2023-06-01"

Probe = Callable[[ProviderConnection], bool]


class RecheckOutcome(StrEnum):
    """What one re-check did."""

    RECOVERED = "recovered"  # the probe succeeded: cleared to active
    RETRY_SCHEDULED = "retry_scheduled"  # failed; re-checked again at ``retry_at``
    GAVE_UP = "gave_up"  # the last allowed re-check failed: stays expired
    SKIPPED = "skipped"  # no longer due, or another process claimed it first


@dataclass(frozen=True, slots=True)
class Recheck:
    """The result of one re-check, for logs and the management command."""

    connection_id: int
    label: str
    outcome: RecheckOutcome
    retry_count: int
    retry_at: datetime | None


def expired_retry_delay(count: int) -> timedelta:
    """The wait after the ``count``-th failed re-check: 5 min × 2^(count − 1)."""
    return EXPIRED_RETRY_BACKOFF * 2 ** max(0, count - 1)


def expired_recheck_due(now: datetime) -> QuerySet[ProviderConnection]:
    """Active-flagged expired connections of OAuth providers with a re-check due at ``now``.

    Connections an operator switched off (``is_active`` false) are left alone.
    """
    return (
        ProviderConnection.objects.filter(
            test_status=TestStatus.EXPIRED,
            provider__category=ProviderCategory.OAUTH,
            is_active=True,
            expired_retry_count__lt=EXPIRED_RETRY_MAX,
        )
        .filter(Q(expired_retry_at__isnull=True) | Q(expired_retry_at__lte=now))
        .select_related("provider")
        .order_by("expired_retry_at", "id")
    )


def probe_models(connection: ProviderConnection) -> bool:
    """``GET {base_url}/models`` with the connection's secret: True on a 2xx answer."""
    url = f"{connection.effective_base_url}/models"
    try:
        response = httpx.get(url, headers=_probe_headers(connection), timeout=PROBE_TIMEOUT_SECONDS)
    except httpx.HTTPError as exc:
        logger.info("expired re-check of %s: %s", connection, exc)
        return False
    return response.is_success


def _probe_headers(connection: ProviderConnection) -> dict[str, str]:
    secret = connection.get_secret()
    if not secret:
        return {}
    if connection.provider.wire_format == WireFormat.ANTHROPIC:
        return {"x-api-key": secret, "anthropic-version": ANTHROPIC_VERSION}
    return {"authorization": f"Bearer {secret}"}


def _claim(connection: ProviderConnection, now: datetime) -> bool:
    """Move the due time past the probe, if nobody changed the retry fields meanwhile."""
    claimed = ProviderConnection.objects.filter(
        pk=connection.pk,
        test_status=TestStatus.EXPIRED,
        expired_retry_count=connection.expired_retry_count,
        expired_retry_at=connection.expired_retry_at,
    ).update(expired_retry_at=now + EXPIRED_CLAIM)
    return claimed == 1


def _probe_safely(probe: Probe, connection: ProviderConnection) -> bool:
    try:
        return probe(connection)
    except Exception:  # a broken probe counts as a failed re-check, never ends the pass
        logger.exception("expired re-check probe of %s raised", connection)
        return False


def _record_failure(connection: ProviderConnection, now: datetime) -> Recheck:
    count = connection.expired_retry_count + 1
    retry_at = now + expired_retry_delay(count)
    ProviderConnection.objects.filter(pk=connection.pk).update(
        expired_retry_count=count, expired_retry_at=retry_at
    )
    connection.expired_retry_count, connection.expired_retry_at = count, retry_at
    last = count >= EXPIRED_RETRY_MAX
    outcome = RecheckOutcome.GAVE_UP if last else RecheckOutcome.RETRY_SCHEDULED
    return Recheck(connection.pk, str(connection), outcome, count, retry_at)


def expired_recheck(
    *, connection: ProviderConnection, now: datetime, probe: Probe | None = None
) -> Recheck:
    """Re-check one expired connection: probe it (``probe_models`` unless given), then clear
    it or schedule the next try."""
    probe = probe or probe_models
    if not _claim(connection, now):
        count, at = connection.expired_retry_count, connection.expired_retry_at
        return Recheck(connection.pk, str(connection), RecheckOutcome.SKIPPED, count, at)
    if _probe_safely(probe, connection):
        connection_clear_error(connection=connection)
        return Recheck(connection.pk, str(connection), RecheckOutcome.RECOVERED, 0, None)
    return _record_failure(connection, now)


def expired_recheck_pass(*, now: datetime, probe: Probe | None = None) -> list[Recheck]:
    """One pass: re-check every connection due at ``now``."""
    due = list(expired_recheck_due(now))  # materialised: no cursor open across the writes
    results = [expired_recheck(connection=c, now=now, probe=probe) for c in due]
    for result in results:
        logger.info("expired re-check of %s: %s", result.label, result.outcome)
    return results


def expired_recheck_pass_now() -> list[Recheck]:
    """One pass at the current time, with the default probe (the periodic background pass)."""
    return expired_recheck_pass(now=timezone.now())
