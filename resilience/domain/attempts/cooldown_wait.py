"""Waiting out a short cooldown instead of ending a combo with a 429 (the ``comboCooldownWait``
settings section), pure.

When every target of a combo is locked or cooling down for a short, transient reason, the
combo may wait for the earliest one to come back and dispatch again. ``should_wait`` decides
one such wait; the caller owns the clock, the lock lookup and the budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_MAX_WAIT_MS = 90_000
DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_BUDGET_MS = 300_000

# Wait only for these reasons, never for the denied ones; any other (unknown, empty or
# missing) reason fails closed.
ALLOWED_REASONS = frozenset(
    {"rate_limit", "rate_limited", "transient", "overloaded", "server_error", "circuit_open"}
)
DENIED_REASONS = frozenset({"quota_exhausted", "auth_error", "not_found", "not_found_local"})


@dataclass(frozen=True, slots=True)
class ComboCooldownWaitSettings:
    """The ``comboCooldownWait`` settings section, already in range.

    * ``enabled``: whether a combo waits at all. Resolved to False when ``max_wait_ms`` or
      ``max_attempts`` is 0, whatever the document says.
    * ``max_wait_ms``: the longest single wait; a target cooling down for longer is not
      waited for.
    * ``max_attempts``: the most waits in one request.
    * ``budget_ms``: the total time one request may spend waiting; resolved to at least
      ``max_wait_ms``.
    """

    enabled: bool = True
    max_wait_ms: int = DEFAULT_MAX_WAIT_MS
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    budget_ms: int = DEFAULT_BUDGET_MS

    @property
    def max_wait_seconds(self) -> float:
        return self.max_wait_ms / 1000

    @property
    def budget_seconds(self) -> float:
        return self.budget_ms / 1000


def effectively_enabled(enabled: bool, max_wait_ms: int, max_attempts: int) -> bool:
    """``enabled`` unless a zero ``max_wait_ms`` or ``max_attempts`` rules every wait out."""
    return enabled and max_wait_ms > 0 and max_attempts > 0


def _coerce_wait(wait_ms: float) -> int:
    if not isinstance(wait_ms, int | float) or not math.isfinite(wait_ms) or wait_ms <= 0:
        return 0
    return math.ceil(wait_ms)


def should_wait(
    reason: str | None,
    wait_ms: float,
    attempt: int,
    budget_left_ms: float,
    settings: ComboCooldownWaitSettings,
) -> tuple[bool, int]:
    """Whether to wait ``wait_ms`` for a cooling target and dispatch again, and the
    wait in milliseconds (non-finite or ≤ 0 → 0; a fraction rounds up), returned either way
    for logging.

    Waits iff the settings are enabled, ``reason`` is allowed and not denied, 0 < wait ≤
    ``max_wait_ms``, ``attempt`` (the waits already done in this request, from 0) is below
    ``max_attempts``, and ``budget_left_ms`` covers the wait.
    """
    wait = _coerce_wait(wait_ms)
    allowed = bool(reason) and reason in ALLOWED_REASONS and reason not in DENIED_REASONS
    decision = (
        settings.enabled
        and allowed
        and 0 < wait <= settings.max_wait_ms
        and attempt < settings.max_attempts
        and budget_left_ms >= wait
    )
    return decision, wait
