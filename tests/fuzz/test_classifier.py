"""The failure classifier on arbitrary failures: never an exception, always a known reason, a
cooldown and a backoff level within the profile's and the rules' bounds."""

from __future__ import annotations

from datetime import tzinfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from resilience.domain.breaker.state import FailureKind
from resilience.domain.classify import rules as rules
from resilience.domain.classify.classifier import (
    DEFAULT_COOLDOWN_PROFILES,
    Classification,
    CooldownProfile,
    FailureInput,
    Reason,
    RuleMatch,
    RuleScope,
    classify,
    classify_429_kind,
)
from tests.fuzz.conftest import counted
from tests.fuzz.strategies import BODIES, HEADERS, NOW, TZ

pytestmark = pytest.mark.fuzz

_SIGNALS = (
    "Your account has been deactivated",
    "The model `gpt-3` has been deprecated",
    "This endpoint has moved",
    "billing suspended",
    "insufficient credits",
    "You exceeded your current quota",
    "daily quota exceeded",
    "tokens per day (TPD)",
    "weekly limit reached",
    "session limit reached, resets in 2h",
    "subscription usage limit",
    "rate limit exceeded",
    "Too many requests",
    "context length exceeded",
    "previous_response_id does not belong to this organization",
    "exhausted your capacity",
    "overloaded",
    "free tier",
    "invalid api key",
    "model not found",
    "not allowed to access model",
    "Please retry in 12s",
)
TEXT = st.one_of(
    BODIES,
    st.lists(st.sampled_from(_SIGNALS), min_size=1, max_size=3).map(" ".join),
)
STATUS = st.one_of(
    st.sampled_from([400, 401, 402, 403, 404, 406, 408, 409, 410, 429, 432, 500, 502, 503, 504]),
    st.integers(min_value=0, max_value=999),
)
CODES = st.one_of(
    st.none(),
    st.sampled_from(
        [
            "executor_contract_violation",
            "invalid_previous_response_binding",
            "model_not_found",
            "insufficient_quota",
            "invalid_request_error",
        ]
    ),
    st.text(max_size=12),
)
RULE = st.one_of(
    st.none(),
    st.builds(
        RuleMatch,
        reason=st.one_of(st.sampled_from([r.value for r in Reason]), st.text(max_size=12)),
        scope=st.sampled_from(list(RuleScope)),
        cooldown_ms=st.one_of(st.none(), st.integers(min_value=0, max_value=10**10)),
    ),
)
HEADERS_WITH_HINT = st.one_of(
    HEADERS, st.just({"x-omni-fallback-hint": "connection_cooldown", "retry-after": "3"})
)
FAILURE = st.builds(
    FailureInput,
    status=STATUS,
    text=TEXT,
    headers=HEADERS_WITH_HINT,
    structured_code=CODES,
    structured_type=CODES,
    backoff_level=st.integers(min_value=0, max_value=40),
    provider=st.sampled_from(["", "openai", "anthropic", "gemini", "acme"]),
    honors_rule_scope=st.booleans(),
    rule=RULE,
    banned_signals=st.lists(st.text(max_size=10), max_size=2).map(tuple),
)
PROFILE = st.one_of(
    st.sampled_from(list(DEFAULT_COOLDOWN_PROFILES.values())),
    st.builds(
        CooldownProfile,
        base_cooldown_ms=st.integers(min_value=-1, max_value=10**8),
        use_upstream_retry_hints=st.booleans(),
        max_backoff_steps=st.integers(min_value=-1, max_value=20),
        max_cooldown_ms=st.integers(min_value=0, max_value=10**9),
        category=st.sampled_from(["oauth", "api_key", "local"]),
    ),
)
KNOWN_REASONS = {reason.value for reason in Reason} | {
    "executor_contract_violation",
    "invalid_previous_response_binding",
}


def cooldown_bound(failure: FailureInput, profile: CooldownProfile) -> int:
    """The longest cooldown any branch may set for this failure and profile."""
    rule_ms = failure.rule.cooldown_ms if failure.rule and failure.rule.cooldown_ms else 0
    return max(
        rules.PERMANENT_COOLDOWN_MS,
        rule_ms,
        profile.base_cooldown_ms,
        profile.max_cooldown_ms,
        rules.DEFAULT_MAX_COOLDOWN_MS,
    )


@given(FAILURE, PROFILE, NOW, TZ, st.one_of(st.none(), st.integers(min_value=-3, max_value=30)))
@counted
def test_classify(
    failure: FailureInput, profile: CooldownProfile, now: float, tz: tzinfo, hour: int | None
) -> None:
    found = classify(failure, profile, now=now, tz=tz, reset_hour=hour)

    assert isinstance(found, Classification)
    rule_reason = {failure.rule.reason} if failure.rule else set()
    assert str(found.reason) in KNOWN_REASONS | rule_reason
    assert isinstance(found.cooldown_ms, int)
    assert 0 <= found.cooldown_ms <= cooldown_bound(failure, profile)
    assert 0 <= found.new_backoff_level <= max(failure.backoff_level, profile.max_backoff_steps)
    if not found.fallback:  # a request that may not fall back sets no cooldown
        assert found.cooldown_ms == 0
    if found.used_upstream_hint:
        assert found.hint_source is not None and found.new_backoff_level == 0
    assert classify(failure, profile, now=now, tz=tz, reset_hour=hour) == found


@given(STATUS, TEXT)
@counted
def test_classify_429_kind(status: int, text: str) -> None:
    kind = classify_429_kind(status, text)

    assert kind in set(FailureKind)
    if status != 429:
        assert kind is FailureKind.TRANSIENT
