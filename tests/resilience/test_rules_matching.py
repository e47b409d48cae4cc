"""Pure matching of status restatement and provider error rules: restated statuses and
retry hints, operator rules ahead of the catalog, plain-substring and header matching, reset
countdowns, the body a rule matches against, and when a rule's scope is honoured.
"""

from __future__ import annotations

import pytest

from resilience.domain.rules import (
    MAX_RULE_COOLDOWN_MS,
    ErrorRule,
    HeaderMatch,
    Restated,
    RestatementRule,
    RuleReason,
    RuleScope,
    apply_restatement,
    has_operator_rule,
    honors_rule_scope,
    match_error_rule,
    parse_reset_countdown_ms,
    resolve_rule_match_body,
    restatement_haystack,
)
from tests.resilience.rules_support import DAY, HOUR, MIN, QUOTA_TEXT, SEED, seeded_error_rules

AGENTROUTER = tuple(
    RestatementRule(
        provider=row["provider"],
        rule_id=row["rule_id"],
        from_statuses=frozenset(row["from_statuses"]),
        to_status=row["to_status"],
        text_markers=tuple(row["text_markers"]),
        exclude_markers=tuple(row["exclude_markers"]),
        default_retry_after_ms=row["default_retry_after_ms"],
        is_builtin=True,
    )
    for row in SEED.RESTATEMENT_RULES
)


# --- Restatement ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "text", "retry_after_ms", "expected"),
    [
        (403, QUOTA_TEXT, None, Restated(429, 60_000, "agentrouter-quota-misstatus", 403)),
        (400, QUOTA_TEXT, None, Restated(429, 60_000, "agentrouter-quota-misstatus", 400)),
        (403, QUOTA_TEXT, 5_000, Restated(429, 5_000, "agentrouter-quota-misstatus", 403)),
        (403, QUOTA_TEXT, 0, Restated(429, 60_000, "agentrouter-quota-misstatus", 403)),
        (403, QUOTA_TEXT, -1, Restated(429, 60_000, "agentrouter-quota-misstatus", 403)),
        (403, "无权访问模型 gpt-5 (额度不足)", 7, Restated(403, 7)),  # excluded marker
        (403, "无权访问模型 gpt-5", None, Restated(403, None)),
        (401, QUOTA_TEXT, None, Restated(401, None)),  # status not restated
        (403, "forbidden", None, Restated(403, None)),
        (403, "", 9, Restated(403, 9)),
        (403, "   ", None, Restated(403, None)),
    ],
)
def test_apply_restatement_agentrouter(
    status: int, text: str, retry_after_ms: int | None, expected: Restated
) -> None:
    got = apply_restatement(AGENTROUTER, status=status, text=text, retry_after_ms=retry_after_ms)
    assert got == expected


def test_apply_restatement_passes_other_providers_through() -> None:
    assert apply_restatement((), status=403, text=QUOTA_TEXT, retry_after_ms=None) == Restated(
        403, None
    )


def test_restatement_markers_are_case_insensitive_substrings() -> None:
    rule = RestatementRule(
        provider="acme",
        rule_id="acme-quota",
        from_statuses=frozenset({400}),
        to_status=429,
        text_markers=("Quota EXHAUSTED",),
        exclude_markers=("Model",),
        default_retry_after_ms=1_000,
    )

    def restate(text: str, retry_after_ms: int | None = None) -> Restated:
        return apply_restatement([rule], status=400, text=text, retry_after_ms=retry_after_ms)

    assert restate("quota exhausted") == Restated(429, 1_000, "acme-quota", 400)
    assert restate("quota.* exhausted") == Restated(400, None)  # never a regex
    assert restate("QUOTA EXHAUSTED: model", 1) == Restated(400, 1)


def test_restatement_haystack_joins_message_and_json_body() -> None:
    expected = 'Forbidden {"error": "额度不足"}'
    assert restatement_haystack("Forbidden", {"error": "额度不足"}) == expected
    assert restatement_haystack(None, None) == ""


def test_operator_rule_beats_the_catalog_wherever_it_is_listed() -> None:
    operator = ErrorRule(
        provider="openrouter", rule_id="mine", status=402, scope=RuleScope.MODEL, cooldown_ms=5_000
    )
    rules = (*seeded_error_rules("openrouter"), operator)

    got = match_error_rule(rules, status=402, headers={}, body="credits")

    assert got is not None
    assert (got.rule_id, got.scope, got.reason, got.cooldown_ms, got.is_operator) == (
        "mine",
        RuleScope.MODEL,
        RuleReason.QUOTA_EXHAUSTED,
        5_000,
        True,
    )


def test_operator_400_rule_comes_before_the_builtin_400_rules() -> None:
    operator = ErrorRule(
        provider="opencode",
        rule_id="mine-400",
        status=400,
        match="MODEL IS UNAVAILABLE",
        reason=RuleReason.SERVER_ERROR,
        scope=RuleScope.PROVIDER,
    )
    rules = (*seeded_error_rules("opencode"), operator)

    got = match_error_rule(
        rules, status=400, headers={}, body="upstream request failed: model is unavailable."
    )

    assert got is not None and got.rule_id == "mine-400" and got.scope is RuleScope.PROVIDER


def test_operator_match_is_a_plain_substring_never_a_regex() -> None:
    rule = ErrorRule(provider="acme", rule_id="dots", status=429, match="a.c+")
    assert match_error_rule([rule], status=429, headers={}, body="abcc") is None
    assert match_error_rule([rule], status=429, headers={}, body="xA.C+y") is not None


@pytest.mark.parametrize(
    ("header_match", "value", "actual", "matches"),
    [
        (HeaderMatch.EQUALS, "0", "0", True),
        (HeaderMatch.EQUALS, "0", "100", False),
        (HeaderMatch.EQUALS, "Exhausted", "exhausted", True),
        (HeaderMatch.CONTAINS, "=0", "a=1,b=0", True),
        (HeaderMatch.CONTAINS, "=0", "a=1,b=2", False),
    ],
)
def test_header_rules(header_match: HeaderMatch, value: str, actual: str, matches: bool) -> None:
    rule = ErrorRule(
        provider="acme",
        rule_id="h",
        status=429,
        header_name="X-Quota",
        header_value=value,
        header_match=header_match,
    )
    got = match_error_rule([rule], status=429, headers={"x-QUOTA": actual}, body=None)
    assert (got is not None) is matches
    assert match_error_rule([rule], status=429, headers={}, body=None) is None


def test_rule_without_status_matches_any_status() -> None:
    rule = ErrorRule(provider="acme", rule_id="any", match="overdrawn")
    for status in (400, 402, 429, 503):
        assert match_error_rule([rule], status=status, headers={}, body="Overdrawn") is not None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("monthly usage limit reached. resets in 3 days", 3 * DAY),
        ("Reset in 1 day", DAY),
        ("resets in 2 hours", 2 * HOUR),
        ("RESETS IN 45 MINUTES.", 45 * MIN),
        ("resets in 30 seconds", 30_000),
        ("resets in 1 minute", MIN),
        ("resets in 0 hours", None),
        ("resets in 5 weeks", None),
        ("resets soon", None),
        ("", None),
    ],
)
def test_parse_reset_countdown_ms(text: str, expected: int | None) -> None:
    assert parse_reset_countdown_ms(text) == expected


@pytest.mark.parametrize(
    ("full_text", "has_operator", "text", "expected"),
    [
        (True, False, "raw 额度不足", "raw 额度不足"),
        (False, True, "raw", "raw"),
        (True, True, "", {"code": "c"}),
        (False, False, "raw", {"code": "c"}),
    ],
)
def test_resolve_rule_match_body(
    full_text: bool, has_operator: bool, text: str, expected: object
) -> None:
    assert resolve_rule_match_body(full_text, has_operator, {"code": "c"}, text) == expected
    assert resolve_rule_match_body(full_text, has_operator, None, "") is None


def test_honors_rule_scope_and_operator_opt_in() -> None:
    mine = ErrorRule(provider="acme", rule_id="mine", status=429)
    builtin = ErrorRule(provider="acme", rule_id="seed", status=429, is_builtin=True)
    assert has_operator_rule([builtin, mine]) and not has_operator_rule([builtin])
    pairs = ((False, False), (True, False), (False, True), (True, True))
    assert [honors_rule_scope(flag, operator) for flag, operator in pairs] == [
        False,
        True,
        True,
        True,
    ]


@pytest.mark.parametrize(
    ("rule", "body"),
    [
        (ErrorRule(provider="acme", rule_id="long", status=429, cooldown_ms=2**62), "quota"),
        (
            ErrorRule(provider="acme", rule_id="count", status=429, parse_reset_countdown=True),
            "quota reached, resets in 99999999999 days",
        ),
    ],
    ids=["configured (stored before it was bounded)", "counted down in the body"],
)
def test_a_rule_s_cooldown_is_at_most_thirty_days(rule: ErrorRule, body: str) -> None:
    """A lock past the calendar would make every read of the connection's state fail."""
    found = match_error_rule([rule], status=429, headers={}, body=body)

    assert found is not None and found.cooldown_ms == MAX_RULE_COOLDOWN_MS == 30 * DAY
