"""An attempt's limits from the model catalog and the attempt settings."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from routing.domain.plan.planning import Target
from routing.proxy.upstream.client import NO_LIMITS, AttemptLimits

if TYPE_CHECKING:
    from routing.proxy.context import AttemptContext


def limits_for(target: Target, context: AttemptContext) -> tuple[AttemptLimits, float]:
    """A stream attempt's limits and its time-to-first-token limit in seconds: the model's
    catalog entry, else the combo's or the global attempt settings. A plain answer has no
    first token: it keeps the transport's read timeout (``OMNIROUTE_UPSTREAM_READ_TIMEOUT``)."""
    if not context.facts.stream:  # bounded by the transport's read timeout and the deadline
        return NO_LIMITS, math.inf
    policy = context.policy
    entry = context.facts.snapshot.catalog_entry(target.provider.slug, target.model)
    idle_ms = (entry and entry.stream_idle_ms) or policy.stream_idle_ms
    watchdog = context.facts.snapshot.stream_recovery.watchdog
    first_token_ms = (entry and entry.time_to_first_token_ms) or policy.time_to_first_token_ms
    limits = AttemptLimits(idle_ms / 1000, watchdog if watchdog.enabled else None)
    return limits, first_token_ms / 1000
