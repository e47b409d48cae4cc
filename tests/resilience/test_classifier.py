"""Pure tests of the failure classifier (reference-part1 §4.3): tables of failure → verdict."""

from __future__ import annotations

import ast
import sys
from dataclasses import replace
from datetime import UTC
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from resilience.domain import (
    classification,
    classifier,
    classifier_rules,
    classifier_text,
    retry_hints,
    signals,
)
from resilience.domain.breaker_state import FailureKind
from resilience.domain.classifier import (
    DEFAULT_COOLDOWN_PROFILES,
    Classification,
    CooldownProfile,
    FailureInput,
    HintSource,
    Reason,
    RuleMatch,
    RuleScope,
    classify,
    classify_429_kind,
    scaled_cooldown_ms,
)
from resilience.domain.classifier_rules import ERROR_RULES

T0 = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
API = DEFAULT_COOLDOWN_PROFILES["api_key"]
OAUTH = DEFAULT_COOLDOWN_PROFILES["oauth"]
NO_HINTS = replace(API, use_upstream_retry_hints=False)
HOUR, DAY = 3_600_000, 86_400_000
RETRY_30S = {"retry-after": "30"}


def run(
    status: int, text: str = "", profile: CooldownProfile = API, tz: Any = UTC, **fields: Any
) -> Classification:
    fields.setdefault("provider", "acme")
    reset_hour = fields.pop("reset_hour", None)
    failure = FailureInput(status, text, **fields)
    return classify(failure, profile, now=T0, tz=tz, reset_hour=reset_hour)


def verdict(result: Classification) -> tuple[bool, int, int, str]:
    return result.fallback, result.cooldown_ms, result.new_backoff_level, str(result.reason)


# -- scaled cooldowns ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "level", "cooldown", "new_level"),
    [
        *((API, lvl, 3_000 * 2**lvl, lvl + 1) for lvl in range(5)),
        (API, 5, 96_000, 5),
        (API, 6, 96_000, 5),
        *((OAUTH, lvl, 5_000 * 2**lvl, min(lvl + 1, 8)) for lvl in range(9)),
        (OAUTH, 8, 1_280_000, 8),
        (OAUTH, 12, 1_280_000, 8),
        (replace(OAUTH, max_cooldown_ms=60_000), 5, 60_000, 6),
        (replace(OAUTH, max_cooldown_ms=0), 6, 120_000, 7),  # no cap set: 120 s
        (replace(API, max_backoff_steps=0), 3, 3_000, 0),
        (API, -2, 3_000, 1),
    ],
)
def test_scaled_cooldown(
    profile: CooldownProfile, level: int, cooldown: int, new_level: int
) -> None:
    assert scaled_cooldown_ms(profile.base_cooldown_ms, level, profile) == (cooldown, new_level)


@pytest.mark.parametrize("level", range(7))
def test_a_500_walks_the_api_key_ladder(level: int) -> None:
    expected = (3_000 * 2 ** min(level, 5), min(level + 1, 5))
    result = run(500, backoff_level=level)
    assert (result.cooldown_ms, result.new_backoff_level) == expected
    assert result.base_cooldown_ms == 3_000 and result.reason == Reason.SERVER_ERROR


def test_the_oauth_ladder_tops_out_at_1280_s() -> None:
    assert verdict(run(503, profile=OAUTH, backoff_level=8)) == (True, 1_280_000, 8, "server_error")


# -- the global ERROR_RULES table ----------------------------------------------------------------

# rule id → (status, text, fallback, cooldown, new level, reason); level 0 in, API key profile.
RULE_ROWS: dict[str, tuple[int, str, bool, int, int, str]] = {
    "no_credentials": (418, "No credentials found", True, 120_000, 0, "auth_error"),
    "request_not_allowed": (418, "Request not allowed", True, 5_000, 0, "rate_limit_exceeded"),
    "improperly_formed_request": (418, "Improperly formed request", True, 0, 0, "model_capacity"),
    "rate_limit": (418, "Rate limit reached", True, 3_000, 1, "rate_limit_exceeded"),
    "too_many_requests": (418, "Too Many Requests", True, 3_000, 1, "rate_limit_exceeded"),
    "hour_quota_exceeded": (418, "hour quota used", True, 3_000, 1, "quota_exhausted"),
    "quota_has_been_exceeded": (418, "quota has been exceeded", True, 3_000, 1, "quota_exhausted"),
    "quota_exceeded": (418, "Quota exceeded", True, 3_000, 1, "quota_exhausted"),
    "quota_will_reset": (418, "your quota will reset soon", True, 3_000, 1, "quota_exhausted"),
    "capacity_exhausted": (
        418,
        "You have exhausted your capacity",
        True,
        3_000,
        1,
        "quota_exhausted",
    ),
    "quota_exhausted": (418, "quota exhausted", True, 3_000, 1, "quota_exhausted"),
    "free_tier_exhausted": (418, "free tier used up", True, 3_000, 1, "quota_exhausted"),
    "capacity": (418, "no capacity", True, 3_000, 1, "model_capacity"),
    "overloaded": (418, "Overloaded", True, 3_000, 1, "model_capacity"),
    "status_401": (401, "", True, 0, 0, "auth_error"),
    "status_402": (402, "", True, 0, 0, "quota_exhausted"),
    "status_403": (403, "", True, 0, 0, "quota_exhausted"),
    "status_404": (404, "", True, 120_000, 0, "unknown"),
    "status_406": (406, "", True, 3_000, 1, "server_error"),
    "status_408": (408, "", True, 3_000, 1, "server_error"),
    "status_429": (429, "", True, 3_000, 1, "rate_limit_exceeded"),
    "status_500": (500, "", True, 3_000, 1, "server_error"),
    "status_502": (502, "", True, 3_000, 1, "server_error"),
    "status_503": (503, "", True, 3_000, 1, "server_error"),
    "status_504": (504, "", True, 3_000, 1, "server_error"),
}


def test_every_global_rule_has_a_row() -> None:
    assert set(RULE_ROWS) == {rule.rule_id for rule in ERROR_RULES}


@pytest.mark.parametrize(("rule_id", "row"), RULE_ROWS.items())
def test_global_rules(rule_id: str, row: tuple[int, str, bool, int, int, str]) -> None:
    status, text, *expected = row
    assert classifier_rules.matching_rule(status, text).rule_id == rule_id  # type: ignore[union-attr]
    result = run(status, text)
    assert verdict(result) == tuple(expected)
    rule = next(rule for rule in ERROR_RULES if rule.rule_id == rule_id)
    if not rule.backoff:
        assert result.configured_cooldown_ms == result.base_cooldown_ms == rule.cooldown_ms


@pytest.mark.parametrize(
    ("profile", "provider", "reason"),
    [
        (API, "acme", "rate_limit_exceeded"),  # 429 without preserveQuota: status rule only
        (OAUTH, "acme", "model_capacity"),  # OAuth preserves quota: text rules first
        (API, "", "model_capacity"),  # no provider preserves quota
    ],
)
def test_a_429_reads_text_rules_only_when_it_preserves_quota(
    profile: CooldownProfile, provider: str, reason: str
) -> None:
    assert run(429, "model over capacity", profile, provider=provider).reason == reason


def test_an_api_key_429_whose_body_reads_as_long_quota_preserves_it() -> None:
    assert run(429, "daily limit hit, no capacity", provider="acme").reason == "model_capacity"


# -- steps 1-3 ------------------------------------------------------------------------------------

EARLY_ROWS = [
    ("contract", dict(status=500, structured_code="executor_contract_violation"),
     (False, 0, 0, "executor_contract_violation"), True),
    ("binding code", dict(status=400, structured_code="invalid_previous_response_binding"),
     (False, 0, 0, "invalid_previous_response_binding"), True),
    ("binding 409", dict(status=409, text="previous_response_id does not belong to this key"),
     (False, 0, 0, "invalid_previous_response_binding"), True),
    ("supervisor", dict(status=503, headers={"x-omni-fallback-hint": "Connection_Cooldown"}),
     (True, 5_000, 0, "service_not_running"), True),
    ("hint ignored off 503", dict(status=502, headers={"x-omni-fallback-hint": "connection_cooldown"}),
     (True, 3_000, 1, "server_error"), False),
]  # fmt: skip


@pytest.mark.parametrize(("fields", "expected", "skips"), [r[1:] for r in EARLY_ROWS],
                         ids=[r[0] for r in EARLY_ROWS])  # fmt: skip
def test_early_steps(fields: dict[str, Any], expected: tuple[Any, ...], skips: bool) -> None:
    result = run(**fields, backoff_level=0)
    assert verdict(result) == expected
    assert result.skip_provider_breaker is skips


# -- step 5: the error text -----------------------------------------------------------------------

DEACTIVATED_YEAR = 365 * DAY
TEXT_ROWS = [
    ("deactivated", 401, "Your account_deactivated", API, {}, (True, DEACTIVATED_YEAR, 2, "auth_error")),
    ("custom banned", 403, "Org BLOCKED for abuse", API, {"banned_signals": ("  ", "org blocked")},
     (True, DEACTIVATED_YEAR, 2, "auth_error")),
    ("verify is not permanent", 403, "verify your account to continue", OAUTH, {}, (True, 0, 2, "quota_exhausted")),
    ("retired 404", 404, "models/gemini-1.0 is no longer available", API, {}, (True, DAY, 2, "not_found")),
    ("end of life 410", 410, "Model has reached its end of life", API, {}, (True, DAY, 2, "not_found")),
    ("retired needs 404/410", 500, "this model was deprecated", API, {}, (True, 12_000, 3, "server_error")),
    ("endpoint moved", 410, "This API endpoint has moved, update your base_url", API, {}, (True, DAY, 2, "not_found")),
    ("billing suspended", 412, "Account x is suspended: monthly spending limit reached", API, {},
     (True, 120_000, 2, "quota_exhausted")),
    ("credits", 400, "You have insufficient credits to continue", API, {}, (True, 120_000, 2, "quota_exhausted")),
    ("credits on oauth 429", 429, "credit_balance_too_low", OAUTH, {}, (True, 120_000, 2, "quota_exhausted")),
    ("credits: api-key 429 w/o quota wording", 429, "payment required", API, {},
     (True, 12_000, 3, "rate_limit_exceeded")),
    ("credits: api-key 429 with quota wording", 429, "You exceeded your current quota", API, {},
     (True, 120_000, 2, "quota_exhausted")),
    ("credits: compatible provider", 402, "insufficient balance", API, {"provider": "openai-compatible-x"},
     (True, 0, 2, "quota_exhausted")),
    ("weekly, ungated", 429, "you have reached your weekly usage limit", API, {},
     (True, DAY, 2, "quota_exhausted")),
    ("session, ungated", 429, "You (bob) have reached your session usage limit", API, {},
     (True, 5 * HOUR, 2, "quota_exhausted")),
    ("session needs usage limit", 401, "session expired", API, {}, (True, 0, 2, "auth_error")),
    ("route restriction", 403, "Fire Pass API keys are not authorized for this route.", API, {},
     (False, 0, 2, "unknown")),
    ("403 api key", 403, "Forbidden", API, {}, (True, 12_000, 3, "auth_error")),
    ("403 api key, quota text", 403, "Quota has been exceeded", API, {}, (True, 12_000, 3, "quota_exhausted")),
    ("403 api key, project", 403, "API has not been used in project 42", API, {}, (True, 0, 2, "quota_exhausted")),
    ("403 oauth", 403, "Forbidden", OAUTH, {}, (True, 0, 2, "quota_exhausted")),
    ("403 no provider", 403, "Forbidden", API, {"provider": ""}, (True, 0, 2, "quota_exhausted")),
]  # fmt: skip


@pytest.mark.parametrize(("status", "text", "profile", "fields", "expected"),
                         [r[1:] for r in TEXT_ROWS], ids=[r[0] for r in TEXT_ROWS])  # fmt: skip
def test_text_steps(
    status: int,
    text: str,
    profile: CooldownProfile,
    fields: dict[str, Any],
    expected: tuple[Any, ...],
) -> None:
    assert verdict(run(status, text, profile, backoff_level=2, **fields)) == expected


def test_flags_of_the_terminal_text_steps() -> None:
    assert run(401, "account has been disabled").permanent
    assert run(402, "billing_hard_limit_reached").credits_exhausted
    assert run(410, "endpoint has moved").quota_reset_hint_ms == DAY
    assert not run(403, "verify your account to continue", OAUTH).permanent


@pytest.mark.parametrize(
    ("tz", "expected_ms"),
    [(UTC, 6_400_000), (ZoneInfo("Europe/Paris"), 2_800_000)],
)
def test_daily_quota_lasts_until_local_midnight(tz: Any, expected_ms: int) -> None:
    result = run(429, "You have used today's quota, try again tomorrow", OAUTH, tz=tz)
    assert verdict(result) == (True, expected_ms, 0, "quota_exhausted")
    assert result.daily_quota_exhausted


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"headers": {"x-ratelimit-reset": str(int(T0) + 900)}}, (True, 900_000, 0, "quota_exhausted")),
        ({"reset_hour": 23}, (True, 2_800_000, 0, "quota_exhausted")),
        ({}, (True, 5_000, 1, "rate_limit_exceeded")),  # no clock: the short 429 path
    ],
)  # fmt: skip
def test_a_tpd_limit_resets_on_the_providers_clock(
    fields: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    text = "request reached organization TPD rate limit, current: 9, limit: 8"
    result = run(429, text, OAUTH, **fields)
    assert verdict(result) == expected
    assert result.daily_quota_exhausted is (expected[3] == "quota_exhausted")


def test_a_daily_quota_on_a_plain_api_key_429_is_a_rate_limit() -> None:
    assert run(429, "try again tomorrow").reason == "rate_limit_exceeded"


@pytest.mark.parametrize(
    ("status", "text", "profile", "fields", "cooldown", "used_hint", "reset"),
    [
        (429, "Claude Pro usage limit reached", OAUTH, {}, HOUR, False, None),
        (429, "usage limit reached, resets in 2h", OAUTH, {}, HOUR, False, 2 * HOUR),
        (429, "Usage limit reached", OAUTH, {"headers": RETRY_30S}, HOUR, False, None),
        (402, "You've reached your usage limit", API, {"headers": RETRY_30S}, 30_000, True, None),
        (429, "This request would exceed your account's rate limit", OAUTH, {"provider": "claude"},
         HOUR, False, None),
        (432, "usage limit reached", API, {}, HOUR, False, None),
        (432, "upgrade your plan", API, {"headers": RETRY_30S}, 30_000, True, None),
        (432, "upgrade your plan", NO_HINTS, {"headers": RETRY_30S}, HOUR, False, None),
    ],
)  # fmt: skip
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
    assert (result.fallback, result.cooldown_ms, result.reason) == (
        True,
        cooldown,
        "quota_exhausted",
    )
    assert (result.used_upstream_hint, result.quota_reset_hint_ms) == (used_hint, reset)
    assert result.new_backoff_level == (0 if used_hint else 3)


def test_claude_wording_is_a_rate_limit_for_other_providers() -> None:
    text = "This request would exceed your account's rate limit"
    assert run(429, text, OAUTH, provider="other").reason == "rate_limit_exceeded"


@pytest.mark.parametrize(
    ("profile", "cooldown", "level", "used_hint"),
    [(OAUTH, 5_000, 1, False), (API, 7_200_000, 0, True)],
)
def test_quota_reset_hints_are_reported_whatever_the_profile(
    profile: CooldownProfile, cooldown: int, level: int, used_hint: bool
) -> None:
    result = run(402, "Quota exceeded. Your quota will reset after 2h", profile)
    assert verdict(result) == (True, cooldown, level, "quota_exhausted")
    assert result.quota_reset_hint_ms == 7_200_000
    assert (result.used_upstream_hint, result.hint_source) == (used_hint, HintSource.BODY)


# -- provider rules: 403 pre-check, global rules, the 400 operator rule ---------------------------

QUOTA_CONN = RuleMatch("quota_exhausted", RuleScope.CONNECTION, 21_600_000)
AUTH_MODEL = RuleMatch("auth_error", RuleScope.MODEL)


@pytest.mark.parametrize(
    ("status", "text", "rule", "honors", "expected", "scope", "configured"),
    [
        (403, "无权访问模型", QUOTA_CONN, True, (True, 21_600_000, 0, "quota_exhausted"),
         RuleScope.CONNECTION, 21_600_000),
        (403, "无权访问模型", AUTH_MODEL, True, (True, 24_000, 4, "auth_error"), RuleScope.MODEL, None),
        (403, "Forbidden", QUOTA_CONN, False, (True, 24_000, 4, "auth_error"), None, None),
        (429, "", QUOTA_CONN, True, (True, 21_600_000, 4, "quota_exhausted"), RuleScope.CONNECTION,
         21_600_000),
        (429, "", AUTH_MODEL, False, (True, 24_000, 4, "auth_error"), None, None),
        (402, "", RuleMatch("quota_exhausted", RuleScope.CONNECTION, 120_000), False,
         (True, 120_000, 3, "quota_exhausted"), None, 120_000),
        (400, "context window exceeded", QUOTA_CONN, True, (True, 21_600_000, 0, "quota_exhausted"),
         RuleScope.CONNECTION, 21_600_000),
        (400, "model is unavailable", RuleMatch("model_capacity", RuleScope.MODEL, 0), True,
         (True, 0, 0, "model_capacity"), RuleScope.MODEL, 0),
        (400, "odd upstream text", RuleMatch("custom_reason", RuleScope.PROVIDER), False,
         (True, 24_000, 4, "custom_reason"), None, None),
    ],
)  # fmt: skip
def test_provider_rules(
    status: int,
    text: str,
    rule: RuleMatch,
    honors: bool,
    expected: tuple[Any, ...],
    scope: RuleScope | None,
    configured: int | None,
) -> None:
    result = run(status, text, NO_HINTS, backoff_level=3, rule=rule, honors_rule_scope=honors)
    assert verdict(result) == expected
    assert (result.rule_scope, result.configured_cooldown_ms) == (scope, configured)


def test_a_rule_cooldown_replaces_an_upstream_hint() -> None:
    result = run(429, "", rule=QUOTA_CONN, headers=RETRY_30S)
    assert (result.cooldown_ms, result.used_upstream_hint, result.hint_source) == (
        21_600_000,
        False,
        None,
    )


# -- step 9: the 400 branch -----------------------------------------------------------------------

MODEL_CAPACITY_0 = (True, 0, 2, "model_capacity")
NO_FALLBACK = (False, 0, 2, "unknown")
BAD_REQUEST_ROWS = [
    ("overflow", "This model's maximum context length is 8192 tokens", {}, MODEL_CAPACITY_0),
    ("prompt too long", "prompt is too long: 210000 tokens > 200000", {}, MODEL_CAPACITY_0),
    ("malformed", "messages must alternate between user and assistant", {}, MODEL_CAPACITY_0),
    ("tool name", "tool_call function name is empty", {}, MODEL_CAPACITY_0),
    ("param", "max_tokens must be less than 4096", {}, MODEL_CAPACITY_0),
    ("param illegal", "parameter is illegal", {}, MODEL_CAPACITY_0),
    ("access denied", "The requested model is not supported", {}, MODEL_CAPACITY_0),
    ("entitlement", "You do not have access to the model gpt-5", {}, MODEL_CAPACITY_0),
    ("structured code", "Bad request", {"structured_code": "model_not_found"}, MODEL_CAPACITY_0),
    ("azure code", "Bad request", {"structured_code": "Deployment_Not_Found"}, MODEL_CAPACITY_0),
    ("structured type", "Bad request", {"structured_type": "not_found_error"}, MODEL_CAPACITY_0),
    ("permission + model", "no permission for this model",
     {"structured_type": "permission_error"}, MODEL_CAPACITY_0),
    ("permission alone", "key scope lacks this feature", {"structured_type": "permission_error"}, NO_FALLBACK),
    ("bad credential", "Invalid API key for model gpt-4", {}, NO_FALLBACK),
    ("degraded", 'Function id "f-1" submitted for inference is DEGRADED', {}, MODEL_CAPACITY_0),
    ("400 rate text", "Detected high-frequency non-compliant requests", {}, (True, 12_000, 3, "rate_limit_exceeded")),
    ("400 zh rate text", "请求过于频繁", {}, (True, 12_000, 3, "rate_limit_exceeded")),
    ("generic", "Invalid value for field 'temperature'", {}, NO_FALLBACK),
    ("empty", "", {}, NO_FALLBACK),
]  # fmt: skip


@pytest.mark.parametrize(("text", "fields", "expected"), [r[1:] for r in BAD_REQUEST_ROWS],
                         ids=[r[0] for r in BAD_REQUEST_ROWS])  # fmt: skip
def test_bad_request_branch(text: str, fields: dict[str, Any], expected: tuple[Any, ...]) -> None:
    assert verdict(run(400, text, backoff_level=2, **fields)) == expected


# -- step 10 and upstream hints ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "expected"),
    [(API, 3_000), (OAUTH, 5_000), (replace(API, base_cooldown_ms=-1), 5_000)],
)
def test_anything_else_gets_the_base_cooldown(profile: CooldownProfile, expected: int) -> None:
    result = run(418, "", profile, backoff_level=4)
    assert verdict(result) == (True, expected, 4, "unknown")
    assert result.base_cooldown_ms == expected


@pytest.mark.parametrize(
    ("headers", "text", "cooldown", "source"),
    [
        (RETRY_30S, "", 30_000, HintSource.HEADER),
        ({"retry-after": "Tue, 14 Nov 2023 22:14:20 GMT"}, "", 60_000, HintSource.HEADER),
        ({"x-ratelimit-reset": str(int(T0) + 45)}, "", 45_000, HintSource.HEADER),
        ({"x-ratelimit-reset": str(int(T0 * 1000) + 45_000)}, "", 45_000, HintSource.HEADER),
        ({}, '{"error":{"details":[{"@type":"google.rpc.RetryInfo","retryDelay":"1.5s"}]}}', 1_500,
         HintSource.GOOGLE_RPC_RETRY_INFO),
        ({}, '{"error": {"retry_after": 12}}', 12_000, HintSource.BODY),
        ({}, "Please retry in 26.6s.", 26_600, HintSource.BODY),
        ({}, "resets in 900h", 30 * DAY, HintSource.BODY),
    ],
)  # fmt: skip
def test_retryable_failures_honour_upstream_hints(
    headers: dict[str, str], text: str, cooldown: int, source: HintSource
) -> None:
    result = run(429, text, backoff_level=4, headers=headers)
    assert verdict(result) == (True, cooldown, 0, "rate_limit_exceeded")
    assert (result.used_upstream_hint, result.hint_source) == (True, source)
    assert result.base_cooldown_ms == cooldown


@pytest.mark.parametrize("profile", [OAUTH, NO_HINTS])
def test_hints_are_ignored_when_the_profile_says_so(profile: CooldownProfile) -> None:
    result = run(429, "Please retry in 26.6s.", profile, backoff_level=1, headers=RETRY_30S)
    base = profile.base_cooldown_ms
    assert verdict(result) == (True, base * 2, 2, "rate_limit_exceeded")
    assert not result.used_upstream_hint and result.hint_source is None


def test_the_scaled_cooldown_is_capped_by_max_cooldown_ms() -> None:
    profile = replace(OAUTH, max_cooldown_ms=30_000)
    assert verdict(run(500, profile=profile, backoff_level=7)) == (True, 30_000, 8, "server_error")


# -- classify_429_kind ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "text", "kind"),
    [
        (500, "daily limit reached", FailureKind.TRANSIENT),
        (429, "Too many requests", FailureKind.RATE_LIMIT),
        (429, "daily limit reached", FailureKind.QUOTA_EXHAUSTED),
        (429, "monthly quota used up", FailureKind.QUOTA_EXHAUSTED),
        (429, "You exceeded your current quota. Please retry in 38.9s", FailureKind.RATE_LIMIT),
        (429, "out of credits. Please retry in 5s", FailureKind.QUOTA_EXHAUSTED),
        (429, "daily limit; please retry in 7200s", FailureKind.QUOTA_EXHAUSTED),
        (429, '{"error":{"details":[{"@type":"RetryInfo","retryDelay":"30s"}],'
              '"message":"per-day limit"}}', FailureKind.RATE_LIMIT),
        (429, '{"error":"usage limit reached"}', FailureKind.QUOTA_EXHAUSTED),
        (429, "organization TPD rate limit", FailureKind.QUOTA_EXHAUSTED),
        (429, "额度已用尽", FailureKind.QUOTA_EXHAUSTED),
        (429, "请求过于频繁，请稍后重试。", FailureKind.RATE_LIMIT),
        (429, "Resource has been exhausted (e.g. check quota).", FailureKind.RATE_LIMIT),
    ],
)  # fmt: skip
def test_classify_429_kind(status: int, text: str, kind: FailureKind) -> None:
    assert classify_429_kind(status, text) == kind


# -- purity ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "module", [classifier, classification, classifier_rules, classifier_text, retry_hints, signals]
)
def test_module_imports_only_the_stdlib_and_the_domain(module: Any) -> None:
    tree = ast.parse(Path(module.__file__).read_text())
    names = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    names |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    outside = {m for m in names if m.split(".")[0] not in sys.stdlib_module_names}
    assert all(m.startswith("resilience.domain") for m in outside), outside
