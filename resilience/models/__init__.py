"""Persisted resilience state: the settings document, breaker snapshots, model locks and the
rules that restate provider errors."""

from __future__ import annotations

from resilience.models.breakers import CircuitBreaker
from resilience.models.lockouts import ModelCooldown, ModelLockRecord
from resilience.models.rules import ProviderErrorRule, StatusRestatementRule
from resilience.models.settings import ResilienceSettings

__all__ = [
    "CircuitBreaker",
    "ModelCooldown",
    "ModelLockRecord",
    "ProviderErrorRule",
    "ResilienceSettings",
    "StatusRestatementRule",
]
