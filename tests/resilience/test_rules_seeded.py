"""Every seeded provider error rule (``0003_rules``) matched against a response of its
own, the near misses that must not match, and the catalog order that decides overlaps.
"""

from __future__ import annotations

import pytest

from resilience.domain.rules import match_error_rule
from tests.resilience.rules_support import DAY, HOUR, ORG, SEEDED_ROWS, seeded_error_rules

# --- Error rules: every seeded row -------------------------------------------------------

# base rule id: status, headers, body, (reason, scope, cooldown)
SEEDED_CASES: dict[str, tuple[int, dict[str, str], object, tuple[str, str, int | None]]] = {
    "opencode-endpoint-unavailable-400": (
        400,
        {},
        "The endpoint is unavailable right now",
        ("model_capacity", "model", 300_000),
    ),
    "opencode-endpoint-unavailable-429": (
        429,
        {},
        {"error": "Endpoint is UNAVAILABLE"},
        ("model_capacity", "model", 300_000),
    ),
    "opencode-monthly-quota-resets-in": (
        429,
        {},
        "Monthly usage limit reached. Resets in 3 days.",
        ("quota_exhausted", "connection", 3 * DAY),
    ),
    "opencode-quota-exhausted-headers-requests": (
        429,
        {"X-RateLimit-Remaining-Requests": "0"},
        "",
        ("quota_exhausted", "connection", None),
    ),
    "opencode-quota-exhausted-headers-tokens": (
        429,
        {"x-ratelimit-remaining-tokens": " 0 "},
        "",
        ("quota_exhausted", "connection", None),
    ),
    "opencode-quota-exhausted-body-organization": (
        429,
        {},
        ORG,
        ("quota_exhausted", "connection", None),
    ),
    "opencode-quota-exhausted-body-account": (
        429,
        {},
        "ACCOUNT_QUOTA_EXCEEDED",
        ("quota_exhausted", "connection", None),
    ),
    "opencode-quota-exhausted-body-plan": (
        429,
        {},
        "error: plan_limit_reached",
        ("quota_exhausted", "connection", None),
    ),
    "opencode-400-model-unavailable": (
        400,
        {},
        "Upstream request failed: model is unavailable.",
        ("model_capacity", "model", HOUR),
    ),
    "minimax-per-model-quota": (
        429,
        {"X-Model-Quota-Remaining": "haiku=0,sonnet=42"},
        "",
        ("quota_exhausted", "model", None),
    ),
    "cloudflare-ai-daily-neuron-allocation": (
        429,
        {},
        "You have used up your daily free allocation of 10,000 neurons",
        ("quota_exhausted", "connection", None),
    ),
    "openrouter-credit-exhausted-402": (
        402,
        {},
        {"error": {"message": "Insufficient credits"}},
        ("quota_exhausted", "connection", 120_000),
    ),
    "agentrouter-user-quota-exhausted-400": (
        400,
        {},
        {"error": {"message": "用户额度不足"}},
        ("quota_exhausted", "connection", None),
    ),
    "agentrouter-user-quota-exhausted-403": (
        403,
        {},
        "用户额度不足",
        ("quota_exhausted", "connection", None),
    ),
    "agentrouter-user-quota-exhausted-429": (
        429,
        {},
        "额度不足",
        ("quota_exhausted", "connection", None),
    ),
    "agentrouter-model-access-denied": (
        403,
        {},
        {"error": {"message": "无权访问模型 claude-x"}},
        ("auth_error", "model", 6 * HOUR),
    ),
}


def test_every_seeded_rule_has_a_case() -> None:
    assert {rule_id for _, rule_id in SEEDED_ROWS} == set(SEEDED_CASES)
    assert len(SEEDED_ROWS) == 4 * 9 + 2 + 1 + 1 + 4


@pytest.mark.parametrize(("provider", "rule_id"), SEEDED_ROWS)
def test_match_error_rule_seeded_row(provider: str, rule_id: str) -> None:
    status, headers, body, (reason, scope, cooldown) = SEEDED_CASES[rule_id]

    got = match_error_rule(seeded_error_rules(provider), status=status, headers=headers, body=body)

    assert got is not None
    assert (got.rule_id, got.reason, got.scope, got.cooldown_ms) == (
        rule_id,
        reason,
        scope,
        cooldown,
    )
    assert got.is_operator is False


@pytest.mark.parametrize(
    ("provider", "status", "headers", "body"),
    [
        ("opencode", 429, {}, "Monthly usage limit reached."),  # no countdown: no match
        ("opencode", 429, {}, "monthly usage limit reached, resets in 0 days"),
        ("opencode", 429, {"x-ratelimit-remaining-requests": "10"}, ""),  # equals, not contains
        ("opencode", 500, {}, "endpoint is unavailable"),
        ("minimax", 429, {"x-model-quota-remaining": "haiku=12,sonnet=42"}, ""),
        ("minimax", 429, {}, "quota"),
        ("openrouter", 429, {}, "insufficient credits"),
        ("cloudflare-ai", 503, {}, "daily free allocation"),
        ("agentrouter", 401, {}, "额度不足"),
        ("agentrouter", 400, {}, "无权访问模型"),  # model-access-denied is 403 only
        ("unknown-provider", 429, {}, "额度不足"),
    ],
)
def test_match_error_rule_no_match(
    provider: str, status: int, headers: dict[str, str], body: str
) -> None:
    rules = seeded_error_rules(provider)
    assert match_error_rule(rules, status=status, headers=headers, body=body) is None


def test_agentrouter_quota_rule_comes_before_access_denied() -> None:
    got = match_error_rule(
        seeded_error_rules("agentrouter"), status=403, headers={}, body="无权访问模型; 额度不足"
    )
    assert got is not None and got.rule_id == "agentrouter-user-quota-exhausted-403"
