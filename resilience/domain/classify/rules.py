"""The global error rules and cooldown constants of the failure classifier, pure.

Stdlib only. :data:`ERROR_RULES` is checked text rules first (the first phrase contained in the
error text, case-insensitive), then status rules. A *backoff* rule gets the scaled retryable
cooldown; any other rule carries its own cooldown.
"""

from __future__ import annotations

from dataclasses import dataclass

# COOLDOWN_MS of the reference (milliseconds).
UNAUTHORIZED_COOLDOWN_MS = 120_000
PAYMENT_REQUIRED_COOLDOWN_MS = 120_000
NOT_FOUND_COOLDOWN_MS = 120_000
NOT_FOUND_LOCAL_COOLDOWN_MS = 5_000
TRANSIENT_COOLDOWN_MS = 5_000
TRANSIENT_MAX_COOLDOWN_MS = 60_000
REQUEST_NOT_ALLOWED_COOLDOWN_MS = 5_000
RATE_LIMIT_COOLDOWN_MS = 120_000
SERVICE_UNAVAILABLE_COOLDOWN_MS = 2_000
AUTH_EXPIRED_COOLDOWN_MS = 120_000

# Caps and fixed windows of the classifier.
DEFAULT_MAX_COOLDOWN_MS = 120_000  # the scaled-cooldown cap when the profile sets none
PERMANENT_COOLDOWN_MS = 365 * 86_400_000  # one year: "never" for a deactivated account
RETIRED_COOLDOWN_MS = 86_400_000  # retired model / moved endpoint
DAY_CAP_MS = 86_400_000  # daily quota: until local midnight, at most a day
WEEKLY_CAP_COOLDOWN_MS = 86_400_000
SESSION_CAP_COOLDOWN_MS = 5 * 3_600_000
SUBSCRIPTION_COOLDOWN_MS = 3_600_000
SERVICE_SUPERVISOR_COOLDOWN_MS = 5_000

RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
NOT_ACCEPTABLE = 406
PLAN_LIMIT_EXCEEDED = 432


@dataclass(frozen=True, slots=True)
class ErrorRule:
    """One global rule: a text phrase or a status, and what it means."""

    rule_id: str
    reason: str
    text: str | None = None
    status: int | None = None
    cooldown_ms: int | None = None
    backoff: bool = False


def _text(rule_id: str, text: str, reason: str, cooldown_ms: int | None = None) -> ErrorRule:
    return ErrorRule(
        rule_id, reason, text=text, cooldown_ms=cooldown_ms, backoff=cooldown_ms is None
    )


def _status(rule_id: str, status: int, reason: str, cooldown_ms: int | None = None) -> ErrorRule:
    backoff = cooldown_ms is None
    return ErrorRule(rule_id, reason, status=status, cooldown_ms=cooldown_ms, backoff=backoff)


_QUOTA, _RATE, _CAPACITY = "quota_exhausted", "rate_limit_exceeded", "model_capacity"
_SERVER, _AUTH, _UNKNOWN = "server_error", "auth_error", "unknown"

ERROR_RULES: tuple[ErrorRule, ...] = (
    _text("no_credentials", "no credentials", _AUTH, NOT_FOUND_COOLDOWN_MS),
    _text("request_not_allowed", "request not allowed", _RATE, REQUEST_NOT_ALLOWED_COOLDOWN_MS),
    _text("improperly_formed_request", "improperly formed request", _CAPACITY, 0),
    _text("rate_limit", "rate limit", _RATE),
    _text("too_many_requests", "too many requests", _RATE),
    _text("hour_quota_exceeded", "hour quota", _QUOTA),
    _text("quota_has_been_exceeded", "quota has been exceeded", _QUOTA),
    _text("quota_exceeded", "quota exceeded", _QUOTA),
    _text("quota_will_reset", "quota will reset", _QUOTA),
    _text("capacity_exhausted", "exhausted your capacity", _QUOTA),
    _text("quota_exhausted", "quota exhausted", _QUOTA),
    _text("free_tier_exhausted", "free tier", _QUOTA),
    _text("capacity", "capacity", _CAPACITY),
    _text("overloaded", "overloaded", _CAPACITY),
    _status("status_401", 401, _AUTH, 0),
    _status("status_402", 402, _QUOTA, 0),
    _status("status_403", 403, _QUOTA, 0),
    _status("status_404", 404, _UNKNOWN, NOT_FOUND_COOLDOWN_MS),
    _status("status_406", 406, _SERVER),
    _status("status_408", 408, _SERVER),
    _status("status_429", 429, _RATE),
    _status("status_500", 500, _SERVER),
    _status("status_502", 502, _SERVER),
    _status("status_503", 503, _SERVER),
    _status("status_504", 504, _SERVER),
)


def rule_by_text(text: str) -> ErrorRule | None:
    """The first text rule whose phrase the text contains (case-insensitive)."""
    lower = text.lower()
    if not lower:
        return None
    return next((rule for rule in ERROR_RULES if rule.text and rule.text in lower), None)


def rule_by_status(status: int) -> ErrorRule | None:
    """The status rule for ``status``, if any."""
    return next((rule for rule in ERROR_RULES if rule.status == status), None)


def matching_rule(status: int, text: str, *, status_only: bool = False) -> ErrorRule | None:
    """Text rules first, then status rules; ``status_only`` skips the text rules (the 429
    of an API-key provider whose body does not read as long-period quota)."""
    by_text = None if status_only else rule_by_text(text)
    return by_text or rule_by_status(status)
