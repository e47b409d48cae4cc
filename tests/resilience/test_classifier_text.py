"""Pure tests of step 5 of the failure classifier (what the error text says) and of the
provider rules it honours: deactivation, retirement, credits, daily / subscription / weekly /
session caps, quota-reset hints, the 403 pre-checks and the operator 400 rule."""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

import pytest

from resilience.domain.classify.classifier import CooldownProfile, HintSource, RuleMatch, RuleScope
from resilience.domain.classify.retry_hints import ms_until_next_local_midnight
from tests.resilience.classifier_support import (
    API,
    AU,
    DAY,
    HOUR,
    NF,
    NO_HINTS,
    OAUTH,
    RETRY_30S,
    RL,
    SE,
    T0,
    UN,
    Q,
    Verdict,
    run,
    verdict,
)

YEAR = 365 * DAY
CREDITS: Verdict = (True, 120_000, 2, Q)
RETIRED: Verdict = (True, DAY, 2, NF)
QUOTA_403: Verdict = (True, 0, 2, Q)

TEXT_ROWS: list[tuple[str, int, str, CooldownProfile, dict[str, Any], Verdict]] = [
    ("deactivated", 401, "Your account_deactivated", API, {}, (True, YEAR, 2, AU)),
    (
        "custom banned signal",
        403,
        "Org BLOCKED for abuse",
        API,
        {"banned_signals": ("  ", "org blocked")},
        (True, YEAR, 2, AU),
    ),
    ("verify is not permanent", 403, "verify your account to continue", OAUTH, {}, QUOTA_403),
    ("retired 404", 404, "models/gemini-1.0 is no longer available", API, {}, RETIRED),
    ("end of life 410", 410, "Model has reached its end of life", API, {}, RETIRED),
    ("retired needs 404/410", 500, "this model was deprecated", API, {}, (True, 12_000, 3, SE)),
    ("endpoint moved", 410, "This endpoint has moved, update your base_url", API, {}, RETIRED),
    ("billing suspended", 412, "Account x is suspended: spending limit reached", API, {}, CREDITS),
    ("credits", 400, "You have insufficient credits to continue", API, {}, CREDITS),
    ("credits, oauth 429", 429, "credit_balance_too_low", OAUTH, {}, CREDITS),
    ("credits, api-key 429", 429, "payment required", API, {}, (True, 12_000, 3, RL)),
    ("credits, api-key 429, quota words", 429, "You exceeded your current quota", API, {}, CREDITS),
    (
        "credits, compatible provider",
        402,
        "insufficient balance",
        API,
        {"provider": "openai-compatible-x"},
        QUOTA_403,
    ),
    (
        "weekly, ungated",
        429,
        "you have reached your weekly usage limit",
        API,
        {},
        (True, DAY, 2, Q),
    ),
    (
        "session, ungated",
        429,
        "You have reached your session usage limit",
        API,
        {},
        (True, 5 * HOUR, 2, Q),
    ),
    ("bare session wording", 401, "session expired", API, {}, (True, 0, 2, AU)),
    (
        "route restriction",
        403,
        "Keys are not authorized for this route.",
        API,
        {},
        (False, 0, 2, UN),
    ),
    ("403 api key", 403, "Forbidden", API, {}, (True, 12_000, 3, AU)),
    ("403 api key, quota text", 403, "Quota has been exceeded", API, {}, (True, 12_000, 3, Q)),
    ("403 api key, project", 403, "API has not been used in project 42", API, {}, QUOTA_403),
    ("403 oauth", 403, "Forbidden", OAUTH, {}, QUOTA_403),
    ("403 no provider", 403, "Forbidden", API, {"provider": ""}, QUOTA_403),
]


@pytest.mark.parametrize(
    ("status", "text", "profile", "fields", "expected"),
    [row[1:] for row in TEXT_ROWS],
    ids=[row[0] for row in TEXT_ROWS],
)
def test_text_steps(
    status: int, text: str, profile: CooldownProfile, fields: dict[str, Any], expected: Verdict
) -> None:
    assert verdict(run(status, text, profile, backoff_level=2, **fields)) == expected


def test_flags_of_the_terminal_text_steps() -> None:
    assert run(401, "account has been disabled").permanent
    assert run(402, "billing_hard_limit_reached").credits_exhausted
    assert run(412, "suspended pending payment").credits_exhausted
    assert run(410, "endpoint has moved").quota_reset_hint_ms == DAY
    assert not run(403, "verify your account to continue", OAUTH).permanent


# -- daily quota ----------------------------------------------------------------------------------


@pytest.mark.parametrize("tz", [ZoneInfo("UTC"), ZoneInfo("Europe/Paris")])
def test_daily_quota_lasts_until_local_midnight(tz: ZoneInfo) -> None:
    result = run(429, "You have used today's quota, try again tomorrow", OAUTH, tz=tz)
    expected = {"UTC": 6_400_000, "Europe/Paris": 2_800_000}[str(tz)]
    assert expected == ms_until_next_local_midnight(now=T0, tz=tz)
    assert verdict(result) == (True, expected, 0, Q)
    assert result.daily_quota_exhausted


TPD = "request reached organization TPD rate limit, current: 9, limit: 8"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"headers": {"x-ratelimit-reset": str(int(T0) + 900)}}, (True, 900_000, 0, Q)),
        ({"reset_hour": 23}, (True, 2_800_000, 0, Q)),
        ({"reset_hour": 24}, (True, 5_000, 1, RL)),  # not an hour: ignored
        ({}, (True, 5_000, 1, RL)),  # no clock, no header: the short 429 path
    ],
)
def test_a_tpd_limit_resets_on_the_providers_clock(
    fields: dict[str, Any], expected: Verdict
) -> None:
    result = run(429, TPD, OAUTH, **fields)
    assert verdict(result) == expected
    assert result.daily_quota_exhausted is (expected[3] == Q)


def test_a_daily_quota_on_a_plain_api_key_429_is_a_rate_limit() -> None:
    assert run(429, "try again tomorrow").reason == RL


# -- subscription caps and quota-reset hints ------------------------------------------------------

CLAUDE_WORDING = "This request would exceed your account's rate limit"


@pytest.mark.parametrize(
    ("status", "text", "profile", "fields", "cooldown", "used_hint", "reset"),
    [
        (429, "Claude Pro usage limit reached", OAUTH, {}, HOUR, False, None),
        (429, "usage limit reached, resets in 2h", OAUTH, {}, HOUR, False, 2 * HOUR),
        (429, "Usage limit reached", OAUTH, {"headers": RETRY_30S}, HOUR, False, None),
        (402, "You've reached your usage limit", API, {"headers": RETRY_30S}, 30_000, True, None),
        (429, CLAUDE_WORDING, OAUTH, {"provider": "claude"}, HOUR, False, None),
        (432, "usage limit reached", API, {}, HOUR, False, None),
    ],
)
def test_subscription_caps(
    status: int,
    text: str,
    profile: CooldownProfile,
    fields: dict[str, Any],
    cooldown: int,
    used_hint: bool,
    reset: int | None,
) -> None:
    result = run(status, text, profile, backoff_level=3, **fields)
    assert (result.fallback, result.cooldown_ms, result.reason) == (True, cooldown, Q)
    assert (result.used_upstream_hint, result.quota_reset_hint_ms) == (used_hint, reset)
    assert result.new_backoff_level == (0 if used_hint else 3)


def test_claude_wording_is_a_rate_limit_for_other_providers() -> None:
    assert run(429, CLAUDE_WORDING, OAUTH, provider="other").reason == RL


@pytest.mark.parametrize(
    ("profile", "cooldown", "level", "used_hint"),
    [(OAUTH, 5_000, 1, False), (API, 7_200_000, 0, True)],
)
def test_quota_reset_hints_are_reported_whatever_the_profile(
    profile: CooldownProfile, cooldown: int, level: int, used_hint: bool
) -> None:
    result = run(402, "Quota exceeded. Your quota will reset after 2h", profile)
    assert verdict(result) == (True, cooldown, level, Q)
    assert result.quota_reset_hint_ms == 7_200_000
    assert (result.used_upstream_hint, result.hint_source) == (used_hint, HintSource.BODY)


# -- provider rules: the 403 pre-check, the global rules, the operator 400 rule -------------------

QUOTA_CONN = RuleMatch("quota_exhausted", RuleScope.CONNECTION, 21_600_000)
AUTH_MODEL = RuleMatch("auth_error", RuleScope.MODEL)
SIX_H, CONN, MODEL = 21_600_000, RuleScope.CONNECTION, RuleScope.MODEL


@pytest.mark.parametrize(
    ("status", "text", "rule", "honors", "expected", "scope", "configured"),
    [
        (403, "无权访问模型", QUOTA_CONN, True, (True, SIX_H, 0, Q), CONN, SIX_H),
        (403, "无权访问模型", AUTH_MODEL, True, (True, 24_000, 4, AU), MODEL, None),
        (403, "Forbidden", QUOTA_CONN, False, (True, 24_000, 4, AU), None, None),
        (429, "", QUOTA_CONN, True, (True, SIX_H, 4, Q), CONN, SIX_H),
        (429, "", AUTH_MODEL, False, (True, 24_000, 4, AU), None, None),
        (402, "", RuleMatch(Q, CONN, 120_000), False, (True, 120_000, 3, Q), None, 120_000),
        (400, "context window exceeded", QUOTA_CONN, True, (True, SIX_H, 0, Q), CONN, SIX_H),
        (
            400,
            "model is unavailable",
            RuleMatch("model_capacity", MODEL, 0),
            True,
            (True, 0, 0, "model_capacity"),
            MODEL,
            0,
        ),
        (
            400,
            "odd upstream text",
            RuleMatch("custom_reason", RuleScope.PROVIDER),
            False,
            (True, 24_000, 4, "custom_reason"),
            None,
            None,
        ),
    ],
)
def test_provider_rules(
    status: int,
    text: str,
    rule: RuleMatch,
    honors: bool,
    expected: Verdict,
    scope: RuleScope | None,
    configured: int | None,
) -> None:
    result = run(status, text, NO_HINTS, backoff_level=3, rule=rule, honors_rule_scope=honors)
    assert verdict(result) == expected
    assert (result.rule_scope, result.configured_cooldown_ms) == (scope, configured)


def test_a_rule_cooldown_replaces_an_upstream_hint() -> None:
    result = run(429, "", rule=QUOTA_CONN, headers=RETRY_30S)
    assert (result.cooldown_ms, result.used_upstream_hint, result.hint_source) == (
        SIX_H,
        False,
        None,
    )
