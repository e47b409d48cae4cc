"""Pure tests of the failure classifier: scaled cooldowns, the global
rule table, steps 1-3 and 6-10, upstream hints and the 429 kind. The text steps (5) are in
``test_classifier_text``."""

from __future__ import annotations

import ast
import re
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from resilience.domain.breaker.state import FailureKind
from resilience.domain.classify import classification, classifier, retry_hints, signals, text_match
from resilience.domain.classify import rules as classifier_rules
from resilience.domain.classify import text as classifier_text
from resilience.domain.classify.classifier import (
    CooldownProfile,
    HintSource,
    Reason,
    classify_429_kind,
    scaled_cooldown_ms,
)
from resilience.domain.classify.rules import ERROR_RULES
from tests.resilience.classifier_support import (
    API,
    AU,
    DAY,
    MC,
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

# -- scaled cooldowns ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "level", "cooldown", "new_level"),
    [
        *((API, lvl, 3_000 * 2**lvl, lvl + 1) for lvl in range(5)),  # 3, 6, 12, 24, 48 s
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
    assert verdict(run(503, profile=OAUTH, backoff_level=8)) == (True, 1_280_000, 8, SE)


def test_the_scaled_cooldown_is_capped_by_max_cooldown_ms() -> None:
    profile = replace(OAUTH, max_cooldown_ms=30_000)
    assert verdict(run(500, profile=profile, backoff_level=7)) == (True, 30_000, 8, SE)


# -- the global ERROR_RULES table (step 6) -------------------------------------------------------

# rule id → (status, text, expected verdict); backoff level 0 in, the API-key profile.
RULE_ROWS: dict[str, tuple[int, str, Verdict]] = {
    "no_credentials": (418, "No credentials found", (True, 120_000, 0, AU)),
    "request_not_allowed": (418, "Request not allowed", (True, 5_000, 0, RL)),
    "improperly_formed_request": (418, "Improperly formed request", (True, 0, 0, MC)),
    "rate_limit": (418, "Rate limit reached", (True, 3_000, 1, RL)),
    "too_many_requests": (418, "Too Many Requests", (True, 3_000, 1, RL)),
    "hour_quota_exceeded": (418, "hour quota used", (True, 3_000, 1, Q)),
    "quota_has_been_exceeded": (418, "quota has been exceeded", (True, 3_000, 1, Q)),
    "quota_exceeded": (418, "Quota exceeded", (True, 3_000, 1, Q)),
    "quota_will_reset": (418, "your quota will reset soon", (True, 3_000, 1, Q)),
    "capacity_exhausted": (418, "You have exhausted your capacity", (True, 3_000, 1, Q)),
    "quota_exhausted": (418, "quota exhausted", (True, 3_000, 1, Q)),
    "free_tier_exhausted": (418, "free tier used up", (True, 3_000, 1, Q)),
    "capacity": (418, "no capacity", (True, 3_000, 1, MC)),
    "overloaded": (418, "Overloaded", (True, 3_000, 1, MC)),
    "status_401": (401, "", (True, 0, 0, AU)),
    "status_402": (402, "", (True, 0, 0, Q)),
    "status_403": (403, "", (True, 0, 0, Q)),
    "status_404": (404, "", (True, 120_000, 0, UN)),
    "status_406": (406, "", (True, 3_000, 1, SE)),
    "status_408": (408, "", (True, 3_000, 1, SE)),
    "status_429": (429, "", (True, 3_000, 1, RL)),
    "status_500": (500, "", (True, 3_000, 1, SE)),
    "status_502": (502, "", (True, 3_000, 1, SE)),
    "status_503": (503, "", (True, 3_000, 1, SE)),
    "status_504": (504, "", (True, 3_000, 1, SE)),
}


def test_every_global_rule_has_a_row() -> None:
    assert set(RULE_ROWS) == {rule.rule_id for rule in ERROR_RULES}


@pytest.mark.parametrize(("rule_id", "row"), RULE_ROWS.items())
def test_global_rules(rule_id: str, row: tuple[int, str, Verdict]) -> None:
    status, text, expected = row
    rule = classifier_rules.matching_rule(status, text)
    assert rule is not None and rule.rule_id == rule_id
    result = run(status, text)
    assert verdict(result) == expected
    if not rule.backoff:
        assert result.configured_cooldown_ms == result.base_cooldown_ms == rule.cooldown_ms


def test_text_rules_come_before_status_rules() -> None:
    assert verdict(run(401, "rate limit hit")) == (True, 3_000, 1, RL)


@pytest.mark.parametrize(
    ("profile", "provider", "text", "reason"),
    [
        (API, "acme", "model over capacity", RL),  # no preserveQuota: the status rule only
        (OAUTH, "acme", "model over capacity", MC),  # OAuth preserves quota: text rules first
        (API, "", "model over capacity", MC),  # no provider preserves quota
        (API, "acme", "daily limit hit, no capacity", MC),  # long-quota wording preserves it
    ],
)
def test_a_429_reads_text_rules_only_when_it_preserves_quota(
    profile: CooldownProfile, provider: str, text: str, reason: str
) -> None:
    assert run(429, text, profile, provider=provider).reason == reason


# -- steps 1-3 ------------------------------------------------------------------------------------

SUPERVISOR = {"x-omni-fallback-hint": "Connection_Cooldown"}


@pytest.mark.parametrize(
    ("fields", "expected", "skips_breaker"),
    [
        (
            {"status": 500, "structured_code": "executor_contract_violation"},
            (False, 0, 3, "executor_contract_violation"),
            True,
        ),
        (
            {"status": 400, "structured_code": "invalid_previous_response_binding"},
            (False, 0, 3, "invalid_previous_response_binding"),
            True,
        ),
        (
            {"status": 409, "text": "previous_response_id does not belong to this key"},
            (False, 0, 3, "invalid_previous_response_binding"),
            True,
        ),
        ({"status": 503, "headers": SUPERVISOR}, (True, 5_000, 0, "service_not_running"), True),
        ({"status": 502, "headers": SUPERVISOR}, (True, 24_000, 4, SE), False),  # 503 only
        ({"status": 409, "text": "conflict"}, (True, 3_000, 3, UN), False),
    ],
)
def test_early_steps(fields: dict[str, Any], expected: Verdict, skips_breaker: bool) -> None:
    result = run(**fields, backoff_level=3)
    assert verdict(result) == expected
    assert result.skip_provider_breaker is skips_breaker


# -- step 9: the 400 branch -----------------------------------------------------------------------

CAPACITY_0: Verdict = (True, 0, 2, MC)
NO_FALLBACK: Verdict = (False, 0, 2, UN)
RATE_LIMITED: Verdict = (True, 12_000, 3, RL)
PERMISSION = {"structured_type": "permission_error"}


@pytest.mark.parametrize(
    ("text", "fields", "expected"),
    [
        ("This model's maximum context length is 8192 tokens", {}, CAPACITY_0),
        ("prompt is too long: 210000 tokens > 200000", {}, CAPACITY_0),
        ("messages must alternate between user and assistant", {}, CAPACITY_0),
        ("tool_call function name is empty", {}, CAPACITY_0),
        ("max_tokens must be less than 4096", {}, CAPACITY_0),
        ("parameter is illegal", {}, CAPACITY_0),
        ("The requested model is not supported", {}, CAPACITY_0),
        ("You do not have access to the model gpt-5", {}, CAPACITY_0),
        ("Bad request", {"structured_code": "model_not_found"}, CAPACITY_0),
        ("Bad request", {"structured_code": "Deployment_Not_Found"}, CAPACITY_0),
        ("Bad request", {"structured_type": "not_found_error"}, CAPACITY_0),
        ("no permission for this model", PERMISSION, CAPACITY_0),
        ("key scope lacks this feature", PERMISSION, NO_FALLBACK),
        ("Invalid API key for model gpt-4", {}, NO_FALLBACK),  # a bad credential, not the model
        ('Function id "f-1" submitted for inference is DEGRADED', {}, CAPACITY_0),
        ("Detected high-frequency non-compliant requests", {}, RATE_LIMITED),
        ("请求过于频繁", {}, RATE_LIMITED),
        ("Invalid value for field 'temperature'", {}, NO_FALLBACK),
        ("", {}, NO_FALLBACK),
    ],
)
def test_bad_request_branch(text: str, fields: dict[str, Any], expected: Verdict) -> None:
    assert verdict(run(400, text, backoff_level=2, **fields)) == expected


# -- steps 8 and 10 -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "headers", "expected", "used_hint"),
    [
        (API, {}, (True, 3_600_000, 3, Q), False),
        (API, RETRY_30S, (True, 30_000, 0, Q), True),
        (NO_HINTS, RETRY_30S, (True, 3_600_000, 3, Q), False),
    ],
)
def test_a_432_plan_limit(
    profile: CooldownProfile, headers: dict[str, str], expected: Verdict, used_hint: bool
) -> None:
    result = run(432, "upgrade your plan", profile, backoff_level=3, headers=headers)
    assert verdict(result) == expected
    assert result.used_upstream_hint is used_hint


@pytest.mark.parametrize(
    ("profile", "expected"),
    [(API, 3_000), (OAUTH, 5_000), (replace(API, base_cooldown_ms=-1), 5_000)],
)
def test_anything_else_gets_the_base_cooldown(profile: CooldownProfile, expected: int) -> None:
    result = run(418, "", profile, backoff_level=4)
    assert verdict(result) == (True, expected, 4, UN)
    assert result.base_cooldown_ms == expected


# -- upstream hints -------------------------------------------------------------------------------

GOOGLE_BODY = '{"error":{"details":[{"@type":"google.rpc.RetryInfo","retryDelay":"1.5s"}]}}'


@pytest.mark.parametrize(
    ("headers", "text", "cooldown", "source"),
    [
        (RETRY_30S, "", 30_000, HintSource.HEADER),
        ({"retry-after": "Tue, 14 Nov 2023 22:14:20 GMT"}, "", 60_000, HintSource.HEADER),
        ({"x-ratelimit-reset": str(int(T0) + 45)}, "", 45_000, HintSource.HEADER),
        ({"x-ratelimit-reset": str(int(T0 * 1000) + 45_000)}, "", 45_000, HintSource.HEADER),
        ({}, GOOGLE_BODY, 1_500, HintSource.GOOGLE_RPC_RETRY_INFO),
        ({}, '{"error": {"retry_after": 12}}', 12_000, HintSource.BODY),
        ({}, "Please retry in 26.6s.", 26_600, HintSource.BODY),
        ({}, "resets in 900h", 30 * DAY, HintSource.BODY),
    ],
)
def test_retryable_failures_honour_upstream_hints(
    headers: dict[str, str], text: str, cooldown: int, source: HintSource
) -> None:
    result = run(429, text, backoff_level=4, headers=headers)
    assert verdict(result) == (True, cooldown, 0, RL)
    assert (result.used_upstream_hint, result.hint_source) == (True, source)
    assert result.base_cooldown_ms == cooldown


@pytest.mark.parametrize("profile", [OAUTH, NO_HINTS])
def test_hints_are_ignored_when_the_profile_says_so(profile: CooldownProfile) -> None:
    result = run(429, "Please retry in 26.6s.", profile, backoff_level=1, headers=RETRY_30S)
    assert verdict(result) == (True, profile.base_cooldown_ms * 2, 2, RL)
    assert not result.used_upstream_hint and result.hint_source is None


# -- classify_429_kind ---------------------------------------------------------------------------

RETRY_INFO_PER_DAY = (
    '{"error":{"details":[{"@type":"RetryInfo","retryDelay":"30s"}],"message":"per-day limit"}}'
)


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
        (429, RETRY_INFO_PER_DAY, FailureKind.RATE_LIMIT),
        (429, '{"error":"usage limit reached"}', FailureKind.QUOTA_EXHAUSTED),
        (429, "usage limit reached", FailureKind.RATE_LIMIT),
        (429, "organization TPD rate limit", FailureKind.QUOTA_EXHAUSTED),
        (429, "额度已用尽", FailureKind.QUOTA_EXHAUSTED),
        (429, "请求过于频繁，请稍后重试。", FailureKind.RATE_LIMIT),
        (429, "Resource has been exhausted (e.g. check quota).", FailureKind.RATE_LIMIT),
    ],
)
def test_classify_429_kind(status: int, text: str, kind: FailureKind) -> None:
    assert classify_429_kind(status, text) == kind


# -- purity ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "module",
    [
        classifier,
        classification,
        classifier_rules,
        classifier_text,
        retry_hints,
        signals,
        text_match,
    ],
)
def test_module_imports_only_the_stdlib_and_the_domain(module: ModuleType) -> None:
    tree = ast.parse(Path(str(module.__file__)).read_text())
    names = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    names |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    outside = {m for m in names if m.split(".")[0] not in sys.stdlib_module_names}
    assert all(m.startswith("resilience.domain") for m in outside), outside


# -- hostile bodies -------------------------------------------------------------------------------

SOURCES = [
    "daily.*limit",
    r"\bmodel.*not.*(?:available|found)\b",
    r"\bmax.*token",
    "is illegal.*range",
]
SAMPLES = [
    "Daily request LIMIT",
    "limit daily",
    "daily\nlimit",
    "the model is not available",
    "models are not found here",
    "model not availableX",
    "not model available",
    "MAX_TOKENS too high",
    "token max",
    "value is illegal, out of range",
    "",
]


@pytest.mark.parametrize("source", SOURCES)
def test_in_order_matching_agrees_with_the_regular_expression(source: str) -> None:
    compiled = re.compile(source, re.IGNORECASE)
    matcher = text_match.pattern(source)
    assert isinstance(matcher, text_match.InOrder)
    for sample in SAMPLES:
        assert bool(matcher.search(sample)) is bool(compiled.search(sample)), sample


@pytest.mark.parametrize(
    "unit", ["context ", "model ", "daily ", "max ", "access ", "suspended ", '{"error": ', "["]
)
def test_a_large_hostile_body_is_classified_in_linear_time(unit: str) -> None:
    text = unit * (50_000 // len(unit))
    started = time.perf_counter()
    for status in (400, 403, 429, 500):
        run(status, text)
    classify_429_kind(429, text)
    assert time.perf_counter() - started < 2.0
