"""From a provider's category and the current settings to its policies (pure)."""

from __future__ import annotations

from collections.abc import Mapping

from resilience.domain.breaker.machine import BreakerPolicy
from resilience.domain.classify.classifier import CooldownProfile
from resilience.domain.profiles import profile_for_category, profile_with_env
from resilience.domain.settings.document import ResilienceSettings
from resilience.domain.window_gate import WindowGatePolicy


def cooldown_profile_for(
    category: str, settings: ResilienceSettings, env: Mapping[str, str], max_cooldown_ms: int
) -> CooldownProfile:
    """The connection-cooldown profile of a provider of ``category``.

    OAuth and API-key providers take the operator's ``connectionCooldown`` section; local ones
    the legacy mapping of their profile-table numbers (see ``resilience.domain.settings.document``).
    ``max_cooldown_ms`` comes from the model-lockout settings. ``env`` is unused (no
    environment variable moves these numbers); it keeps the policy builders' signature.
    """
    cooldown = settings.cooldown_for(profile_for_category(category))
    return CooldownProfile(
        base_cooldown_ms=cooldown.base_cooldown_ms,
        use_upstream_retry_hints=cooldown.use_upstream_retry_hints,
        max_backoff_steps=cooldown.max_backoff_steps,
        max_cooldown_ms=max_cooldown_ms,
        category=category,
    )


def breaker_policy_for(
    category: str, settings: ResilienceSettings, env: Mapping[str, str]
) -> BreakerPolicy:
    """The breaker policy of a provider of ``category``: its profile with the operator's numbers.

    ``connectionCooldown.<profile>.useUpstream429BreakerHints`` picks the 429 hint mode; unset
    means off.
    """
    name = profile_for_category(category)
    operator = settings.breaker_for(name)
    return BreakerPolicy.from_profile(
        profile_with_env(name, env),
        failure_threshold=operator.failure_threshold,
        degradation_threshold=operator.degradation_threshold,
        reset_timeout_ms=operator.reset_timeout_ms,
        use_429_hints=bool(settings.cooldown_for(name).use_upstream_429_breaker_hints),
        window_ms=operator.window_ms,
        minimum_calls=operator.minimum_calls,
        failure_rate_percent=operator.failure_rate_percent,
    )


ENV_ON = frozenset({"true", "1", "on"})


def env_enables_window_gate(env: Mapping[str, str]) -> bool:
    """``PROVIDER_COOLDOWN_ENABLED`` turns the gate on whatever the setting says."""
    return env.get("PROVIDER_COOLDOWN_ENABLED", "").strip().lower() in ENV_ON


def window_gate_policy_for(
    category: str, settings: ResilienceSettings, env: Mapping[str, str]
) -> WindowGatePolicy | None:
    """The window-gate policy of a provider of ``category``, or ``None`` while the gate is off."""
    gate = settings.provider_cooldown
    if not (gate.enabled or env_enables_window_gate(env)):
        return None
    return WindowGatePolicy.from_profile(
        profile_with_env(profile_for_category(category), env),
        min_retry_ms=gate.min_retry_cooldown_ms,
        max_retry_ms=gate.max_retry_cooldown_ms,
    )
