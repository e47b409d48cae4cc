"""The classifier's vocabulary: profile, input, verdict, pure.

Stdlib only. Besides the public values this holds :class:`Case` (one failure under
classification) and the verdict builders the decision steps share
(``resilience.domain.classify.classifier``
and ``resilience.domain.classify.text``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import tzinfo
from enum import StrEnum

from resilience.domain.classify import rules as rules
from resilience.domain.classify import signals as sig
from resilience.domain.classify.retry_hints import HintSource, RetryHint, detect_retry_hint
from resilience.domain.rules import RuleScope

__all__ = [
    "DEFAULT_COOLDOWN_PROFILES",
    "Case",
    "Classification",
    "CooldownProfile",
    "FailureInput",
    "HintSource",
    "Reason",
    "RuleMatch",
    "RuleScope",
    "as_reason",
    "hinted",
    "preserves_quota",
    "retryable",
    "rule_verdict",
    "scaled_cooldown_ms",
]


class Reason(StrEnum):
    """Why a request failed, as the cooldown and lockout layers read it."""

    QUOTA_EXHAUSTED = "quota_exhausted"
    RATE_LIMIT_EXCEEDED = "rate_limit_exceeded"
    MODEL_CAPACITY = "model_capacity"
    SERVER_ERROR = "server_error"
    AUTH_ERROR = "auth_error"
    UNKNOWN = "unknown"
    NOT_FOUND = "not_found"
    SERVICE_NOT_RUNNING = "service_not_running"
    INVALID_PREVIOUS_RESPONSE_BINDING = "invalid_previous_response_binding"


@dataclass(frozen=True, slots=True)
class CooldownProfile:
    """The runtime connection-cooldown profile; times in milliseconds."""

    base_cooldown_ms: int
    use_upstream_retry_hints: bool
    max_backoff_steps: int
    max_cooldown_ms: int = 1_800_000  # from the model-lockout settings
    category: str = "api_key"  # "oauth" | "api_key" | "local"


DEFAULT_COOLDOWN_PROFILES: Mapping[str, CooldownProfile] = {
    "oauth": CooldownProfile(5_000, False, 8, category="oauth"),
    "api_key": CooldownProfile(3_000, True, 5, category="api_key"),
    "local": CooldownProfile(2_000, True, 3, category="local"),
}


@dataclass(frozen=True, slots=True)
class RuleMatch:
    """What the provider-error-rule registry found for this failure (an input)."""

    reason: str
    scope: RuleScope
    cooldown_ms: int | None = None


@dataclass(frozen=True, slots=True)
class FailureInput:
    """One upstream failure as the classifier sees it; header names lower-cased."""

    status: int
    text: str = ""  # raw body for full-text providers, else the structured message
    headers: Mapping[str, str] = field(default_factory=dict)
    structured_code: str | None = None
    structured_type: str | None = None
    backoff_level: int = 0
    provider: str = ""
    honors_rule_scope: bool = False
    rule: RuleMatch | None = None
    banned_signals: tuple[str, ...] = ()  # the operator's custom banned signals


@dataclass(frozen=True, slots=True)
class Classification:
    """The verdict: fallback or not, the cooldown, the next backoff level and the flags."""

    fallback: bool
    cooldown_ms: int
    new_backoff_level: int
    reason: Reason | str
    permanent: bool = False
    credits_exhausted: bool = False
    daily_quota_exhausted: bool = False
    skip_provider_breaker: bool = False
    used_upstream_hint: bool = False
    hint_source: HintSource | None = None
    quota_reset_hint_ms: int | None = None
    configured_cooldown_ms: int | None = None
    rule_scope: RuleScope | None = None
    base_cooldown_ms: int | None = None


def scaled_cooldown_ms(base_ms: int, level: int, profile: CooldownProfile) -> tuple[int, int]:
    """(cooldown, new level): base × 2^min(level, steps), capped at the profile's
    max_cooldown_ms (120 s when unset); the new level is min(level + 1, steps)."""
    steps = max(0, profile.max_backoff_steps)
    level = max(0, level)
    cap = profile.max_cooldown_ms if profile.max_cooldown_ms > 0 else rules.DEFAULT_MAX_COOLDOWN_MS
    return min(max(0, base_ms) * 2 ** min(level, steps), cap), min(level + 1, steps)


# -- the case under classification ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Case:
    """One failure under classification, with its profile, clock and quota gate."""

    failure: FailureInput
    profile: CooldownProfile
    now: float
    tz: tzinfo
    reset_hour: int | None
    preserve_quota: bool

    @property
    def status(self) -> int:
        return self.failure.status

    @property
    def text(self) -> str:
        return self.failure.text

    @property
    def level(self) -> int:
        return self.failure.backoff_level

    @property
    def use_quota(self) -> bool:
        """The quota gate: quota wording counts unless this is a plain API-key 429."""
        return self.status != 429 or self.preserve_quota

    @property
    def base_ms(self) -> int:
        base = self.profile.base_cooldown_ms
        return base if base >= 0 else rules.TRANSIENT_COOLDOWN_MS

    @property
    def scope(self) -> RuleScope | None:
        rule = self.failure.rule
        return rule.scope if rule is not None and self.failure.honors_rule_scope else None

    def hint(self) -> RetryHint | None:
        """The upstream hint, whatever the profile says (quota-reset hints use it)."""
        return detect_retry_hint(self.failure.headers, self.text, now=self.now, tz=self.tz)

    def upstream_hint(self) -> RetryHint | None:
        """The upstream hint if the profile honours hints."""
        return self.hint() if self.profile.use_upstream_retry_hints else None


def preserves_quota(failure: FailureInput, profile: CooldownProfile) -> bool:
    """No provider, an OAuth provider, or a body that reads as long-period quota."""
    if not failure.provider or profile.category == "oauth":
        return True
    return sig.looks_like_quota_exhausted(failure.text)


def as_reason(value: str) -> Reason | str:
    """The :class:`Reason` member for ``value``, or the string itself (rule reasons)."""
    try:
        return Reason(value)
    except ValueError:
        return value


def retryable(case: Case, reason: str) -> Classification:
    """Retryable fallback: the honoured upstream hint, else the scaled cooldown."""
    hint = case.upstream_hint()
    if hint is not None:
        return hinted(reason, hint)
    cooldown, level = scaled_cooldown_ms(case.base_ms, case.level, case.profile)
    return Classification(True, cooldown, level, as_reason(reason), base_cooldown_ms=case.base_ms)


def hinted(reason: str, hint: RetryHint) -> Classification:
    """Fallback on an upstream hint: cooldown = base = hint, backoff level back to 0."""
    return Classification(
        True,
        hint.ms,
        0,
        as_reason(reason),
        used_upstream_hint=True,
        hint_source=hint.source,
        base_cooldown_ms=hint.ms,
    )


def rule_verdict(case: Case, rule: RuleMatch) -> Classification:
    """A rule honoured ahead of the built-in branch: its cooldown (level 0) or the scaled one."""
    if rule.cooldown_ms is not None:
        ms = rule.cooldown_ms
        return Classification(
            True,
            ms,
            0,
            as_reason(rule.reason),
            base_cooldown_ms=ms,
            configured_cooldown_ms=ms,
            rule_scope=case.scope,
        )
    cooldown, level = scaled_cooldown_ms(case.base_ms, case.level, case.profile)
    return Classification(
        True,
        cooldown,
        level,
        as_reason(rule.reason),
        base_cooldown_ms=case.base_ms,
        rule_scope=case.scope,
    )
