"""Shared inputs of the classifier tests: profiles, a fixed clock, and a one-call runner."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, tzinfo
from typing import Any

from resilience.domain.classify.classifier import (
    DEFAULT_COOLDOWN_PROFILES,
    Classification,
    CooldownProfile,
    FailureInput,
    classify,
)

T0 = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC, 23:13:20 in Paris
API = DEFAULT_COOLDOWN_PROFILES["api_key"]
OAUTH = DEFAULT_COOLDOWN_PROFILES["oauth"]
NO_HINTS = replace(API, use_upstream_retry_hints=False)
HOUR, DAY = 3_600_000, 86_400_000
RETRY_30S = {"retry-after": "30"}

# reasons, short enough for one-line table rows
Q, RL, MC, SE = "quota_exhausted", "rate_limit_exceeded", "model_capacity", "server_error"
AU, UN, NF = "auth_error", "unknown", "not_found"

Verdict = tuple[bool, int, int, str]


def run(
    status: int,
    text: str = "",
    profile: CooldownProfile = API,
    tz: tzinfo = UTC,
    reset_hour: int | None = None,
    **fields: Any,
) -> Classification:
    """Classify one failure at ``T0`` (provider "acme" unless given)."""
    fields.setdefault("provider", "acme")
    failure = FailureInput(status, text, **fields)
    return classify(failure, profile, now=T0, tz=tz, reset_hour=reset_hour)


def verdict(result: Classification) -> Verdict:
    """(fallback, cooldown, new backoff level, reason) of a classification."""
    return result.fallback, result.cooldown_ms, result.new_backoff_level, str(result.reason)
