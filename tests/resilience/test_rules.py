"""Status restatement and provider error rules: pure matching, seeded rows, services, selector."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest
from django.apps import apps
from django.core.exceptions import ValidationError

from resilience.domain.rules import (
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
from resilience.rules_models import OPERATOR_RULES_MAX, ProviderErrorRule, StatusRestatementRule
from resilience.selectors_rules import rules_for_snapshot
from resilience.services.rules import (
    error_rule_delete,
    error_rule_save,
    restatement_rule_delete,
    restatement_rule_save,
    rule_set_enabled,
)
from routing import snapshot

SEED = importlib.import_module("resilience.migrations.0003_rules")
MIN = 60_000
HOUR = 3_600_000
DAY = 86_400_000


def _error_rule(row: dict[str, Any], position: int = 0, is_builtin: bool = True) -> ErrorRule:
    fields = dict(row)
    for name, enum in (("header_match", HeaderMatch), ("scope", RuleScope), ("reason", RuleReason)):
        if name in fields:
            fields[name] = enum(fields[name])
    return ErrorRule(position=position, is_builtin=is_builtin, **fields)


def _seeded_error_rules(provider: str) -> tuple[ErrorRule, ...]:
    rows = [row for row in SEED.ERROR_RULES if row["provider"] == provider]
    return tuple(_error_rule(row, position) for position, row in enumerate(rows))


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


# --- Restatement (§6) ---------------------------------------------------------------------------

QUOTA_TEXT = '{"error": {"message": "用户额度不足, 剩余额度: $0.00"}}'


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


# --- Error rules: every seeded row (§7.2) -------------------------------------------------------

ORG = {"error": {"code": "organization_quota_exceeded"}}
# base rule id: status, headers, body, (reason, scope, cooldown)
SEEDED_CASES: dict[str, tuple[int, dict[str, str], object, tuple[str, str, int | None]]] = {
    "opencode-endpoint-unavailable-400": (
        400, {}, "The endpoint is unavailable right now", ("model_capacity", "model", 300_000)
    ),
    "opencode-endpoint-unavailable-429": (
        429, {}, {"error": "Endpoint is UNAVAILABLE"}, ("model_capacity", "model", 300_000)
    ),
    "opencode-monthly-quota-resets-in": (
        429, {}, "Monthly usage limit reached. Resets in 3 days.",
        ("quota_exhausted", "connection", 3 * DAY),
    ),
    "opencode-quota-exhausted-headers-requests": (
        429, {"X-RateLimit-Remaining-Requests": "0"}, "", ("quota_exhausted", "connection", None)
    ),
    "opencode-quota-exhausted-headers-tokens": (
        429, {"x-ratelimit-remaining-tokens": " 0 "}, "", ("quota_exhausted", "connection", None)
    ),
    "opencode-quota-exhausted-body-organization": (
        429, {}, ORG, ("quota_exhausted", "connection", None)
    ),
    "opencode-quota-exhausted-body-account": (
        429, {}, "ACCOUNT_QUOTA_EXCEEDED", ("quota_exhausted", "connection", None)
    ),
    "opencode-quota-exhausted-body-plan": (
        429, {}, "error: plan_limit_reached", ("quota_exhausted", "connection", None)
    ),
    "opencode-400-model-unavailable": (
        400, {}, "Upstream request failed: model is unavailable.",
        ("model_capacity", "model", HOUR),
    ),
    "minimax-per-model-quota": (
        429, {"X-Model-Quota-Remaining": "haiku=0,sonnet=42"}, "",
        ("quota_exhausted", "model", None),
    ),
    "cloudflare-ai-daily-neuron-allocation": (
        429, {}, "You have used up your daily free allocation of 10,000 neurons",
        ("quota_exhausted", "connection", None),
    ),
    "openrouter-credit-exhausted-402": (
        402, {}, {"error": {"message": "Insufficient credits"}},
        ("quota_exhausted", "connection", 120_000),
    ),
    "agentrouter-user-quota-exhausted-400": (
        400, {}, {"error": {"message": "用户额度不足"}}, ("quota_exhausted", "connection", None)
    ),
    "agentrouter-user-quota-exhausted-403": (
        403, {}, "用户额度不足", ("quota_exhausted", "connection", None)
    ),
    "agentrouter-user-quota-exhausted-429": (
        429, {}, "额度不足", ("quota_exhausted", "connection", None)
    ),
    "agentrouter-model-access-denied": (
        403, {}, {"error": {"message": "无权访问模型 claude-x"}}, ("auth_error", "model", 6 * HOUR)
    ),
}  # fmt: skip
SEEDED_ROWS = [(row["provider"], row["rule_id"]) for row in SEED.ERROR_RULES]


def test_every_seeded_rule_has_a_case() -> None:
    assert {rule_id for _, rule_id in SEEDED_ROWS} == set(SEEDED_CASES)
    assert len(SEEDED_ROWS) == 4 * 9 + 2 + 1 + 1 + 4


@pytest.mark.parametrize(("provider", "rule_id"), SEEDED_ROWS)
def test_match_error_rule_seeded_row(provider: str, rule_id: str) -> None:
    status, headers, body, (reason, scope, cooldown) = SEEDED_CASES[rule_id]

    got = match_error_rule(_seeded_error_rules(provider), status=status, headers=headers, body=body)

    assert got is not None
    assert (got.rule_id, got.reason, got.scope, got.cooldown_ms) == (
        rule_id, reason, scope, cooldown
    )  # fmt: skip
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
    rules = _seeded_error_rules(provider)
    assert match_error_rule(rules, status=status, headers=headers, body=body) is None


def test_agentrouter_quota_rule_comes_before_access_denied() -> None:
    got = match_error_rule(
        _seeded_error_rules("agentrouter"), status=403, headers={}, body="无权访问模型; 额度不足"
    )
    assert got is not None and got.rule_id == "agentrouter-user-quota-exhausted-403"


def test_operator_rule_beats_the_catalog_wherever_it_is_listed() -> None:
    operator = ErrorRule(
        provider="openrouter", rule_id="mine", status=402, scope=RuleScope.MODEL, cooldown_ms=5_000
    )
    rules = (*_seeded_error_rules("openrouter"), operator)

    got = match_error_rule(rules, status=402, headers={}, body="credits")

    assert got is not None
    assert (got.rule_id, got.scope, got.reason, got.cooldown_ms, got.is_operator) == (
        "mine", RuleScope.MODEL, RuleReason.QUOTA_EXHAUSTED, 5_000, True
    )  # fmt: skip


def test_operator_400_rule_comes_before_the_builtin_400_rules() -> None:
    operator = ErrorRule(
        provider="opencode", rule_id="mine-400", status=400, match="MODEL IS UNAVAILABLE",
        reason=RuleReason.SERVER_ERROR, scope=RuleScope.PROVIDER,
    )  # fmt: skip
    rules = (*_seeded_error_rules("opencode"), operator)

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
        provider="acme", rule_id="h", status=429, header_name="X-Quota",
        header_value=value, header_match=header_match,
    )  # fmt: skip
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
        False, True, True, True
    ]  # fmt: skip


# --- Database: seed, validation, services, selector ---------------------------------------------


@pytest.fixture
def seeded(db: None) -> None:
    """The built-in rows of ``0003_rules`` (re-seeded if a transactional test flushed them)."""
    if not ProviderErrorRule.objects.filter(is_builtin=True).exists():
        SEED.seed(apps, None)


@pytest.fixture
def version_moves(
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> Callable[[Callable[[], object]], bool]:
    """``version_moves(fn)``: run ``fn`` and its on-commit callbacks; did the snapshot move?"""

    def run(fn: Callable[[], object]) -> bool:
        before = snapshot._holder.local_version
        with django_capture_on_commit_callbacks(execute=True):
            fn()
        return snapshot._holder.local_version != before

    return run


def _operator_rule(**fields: Any) -> ProviderErrorRule:
    return error_rule_save(
        rule=ProviderErrorRule(),
        fields={"provider": "acme", "rule_id": "r", "status": 429, **fields},
    )


def test_seed_created_the_builtin_rows(seeded: None) -> None:
    rows = ProviderErrorRule.objects.all()
    assert rows.count() == len(SEED.ERROR_RULES) == 44
    assert all(row.is_builtin and row.is_enabled for row in rows)
    denied = rows.get(provider="agentrouter", rule_id="agentrouter-model-access-denied")
    assert (denied.status, denied.match, denied.scope, denied.reason, denied.cooldown_ms) == (
        403, "无权访问模型", "model", "auth_error", 21_600_000
    )  # fmt: skip
    restatement = StatusRestatementRule.objects.get()
    assert (restatement.provider, restatement.rule_id, restatement.is_builtin) == (
        "agentrouter", "agentrouter-quota-misstatus", True
    )  # fmt: skip
    assert restatement.from_statuses == [403, 400] and restatement.to_status == 429


def test_seeded_rows_through_the_selector_restate_and_match(seeded: None) -> None:
    restatements, errors = rules_for_snapshot()

    restated = apply_restatement(
        restatements["agentrouter"], status=403, text=QUOTA_TEXT, retry_after_ms=None
    )
    got = match_error_rule(errors["opencode-go"], status=429, headers={}, body=ORG)

    assert restated == Restated(429, 60_000, "agentrouter-quota-misstatus", 403)
    assert got is not None and got.rule_id == "opencode-quota-exhausted-body-organization"
    assert set(errors) == {p for p, _ in SEEDED_ROWS}


def test_operator_rules_are_capped_builtin_rows_do_not_count(seeded: None) -> None:
    ProviderErrorRule.objects.bulk_create(
        ProviderErrorRule(provider="acme", rule_id=f"r{i}", status=429)
        for i in range(OPERATOR_RULES_MAX - 1)
    )
    _operator_rule(rule_id="last")

    with pytest.raises(ValidationError, match="At most 50 operator rules"):
        _operator_rule(rule_id="one-too-many")
    assert ProviderErrorRule.objects.filter(is_builtin=False).count() == OPERATOR_RULES_MAX
    edited = ProviderErrorRule.objects.get(rule_id="last")
    assert error_rule_save(rule=edited, fields={"status": 402}).status == 402  # edits still pass


def test_restatement_rules_are_capped_too(db: None) -> None:
    StatusRestatementRule.objects.bulk_create(
        StatusRestatementRule(provider="acme", rule_id=f"r{i}", from_statuses=[400], to_status=429)
        for i in range(OPERATOR_RULES_MAX)
    )
    new = StatusRestatementRule(provider="acme", rule_id="x", to_status=429)
    with pytest.raises(ValidationError, match="At most 50 operator rules"):
        restatement_rule_save(rule=new, fields={"from_statuses": [400], "text_markers": ["q"]})


def test_builtin_rows_cannot_be_edited_or_deleted_but_can_be_disabled(seeded: None) -> None:
    rule = ProviderErrorRule.objects.get(rule_id="openrouter-credit-exhausted-402")

    with pytest.raises(ValidationError, match=r"cannot be edited.*cooldown_ms"):
        error_rule_save(rule=rule, fields={"cooldown_ms": 1_000})
    rule.refresh_from_db()
    with pytest.raises(ValidationError, match="built in"):
        error_rule_delete(rule=rule)
    rule_set_enabled(rule=rule, enabled=False)
    error_rule_save(rule=rule, fields={"is_enabled": True})

    rule.refresh_from_db()
    assert (rule.cooldown_ms, rule.is_enabled, rule.is_builtin) == (120_000, True, True)
    restatement = StatusRestatementRule.objects.get()
    with pytest.raises(ValidationError, match="built in"):
        restatement_rule_delete(rule=restatement)
    with pytest.raises(ValidationError, match="cannot be edited"):
        restatement_rule_save(rule=restatement, fields={"to_status": 503})


def test_builtin_flag_is_not_writable(seeded: None) -> None:
    with pytest.raises(ValidationError, match="seed migration"):
        _operator_rule(is_builtin=True)
    builtin = ProviderErrorRule.objects.filter(is_builtin=True).first()
    assert builtin is not None
    builtin.is_builtin = False
    with pytest.raises(ValidationError, match="seed migration"):
        error_rule_save(rule=builtin, fields={"match": "anything"})


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"status": 99}, "status"),
        ({"status": 600}, "status"),
        ({"scope": "galaxy"}, "scope"),
        ({"reason": "bored"}, "reason"),
        ({"header_name": "x-quota"}, "header_value"),
        ({"parse_reset_countdown": True, "cooldown_ms": 5}, "cooldown_ms"),
        ({"status": None}, "status"),  # nothing left to match on
        ({"rule_id": "not a slug"}, "rule_id"),
    ],
)
def test_error_rule_validation(db: None, fields: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        _operator_rule(**fields)
    assert field in caught.value.message_dict


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"from_statuses": []}, "from_statuses"),
        ({"from_statuses": [403, 700]}, "from_statuses"),
        ({"from_statuses": ["403"]}, "from_statuses"),
        ({"text_markers": []}, "text_markers"),
        ({"text_markers": [""]}, "text_markers"),
        ({"exclude_markers": "x"}, "exclude_markers"),
        ({"to_status": 42}, "to_status"),
    ],
)
def test_restatement_rule_validation(db: None, fields: dict[str, Any], field: str) -> None:
    base = {"provider": "acme", "rule_id": "r", "from_statuses": [403], "to_status": 429}
    with pytest.raises(ValidationError) as caught:
        restatement_rule_save(
            rule=StatusRestatementRule(), fields={**base, "text_markers": ["q"], **fields}
        )
    assert field in caught.value.message_dict


def test_provider_lowercased_match_stored_as_given(db: None) -> None:
    rule = _operator_rule(provider="  ACME ", match="Quota EXCEEDED", header_name="")
    assert (rule.provider, rule.match) == ("acme", "Quota EXCEEDED")

    _, errors = rules_for_snapshot()

    got = match_error_rule(errors["acme"], status=429, headers={}, body="quota exceeded")
    assert got is not None and got.is_operator


def test_services_invalidate_the_snapshot_on_commit(
    seeded: None, version_moves: Callable[[Callable[[], object]], bool]
) -> None:
    rule = ProviderErrorRule(provider="acme", rule_id="r", status=429)
    restatement = StatusRestatementRule(
        provider="acme", rule_id="r", from_statuses=[400], to_status=429, text_markers=["q"]
    )
    builtin = ProviderErrorRule.objects.filter(is_builtin=True).first()
    assert builtin is not None

    assert version_moves(lambda: error_rule_save(rule=rule))
    assert version_moves(lambda: restatement_rule_save(rule=restatement))
    assert version_moves(lambda: rule_set_enabled(rule=builtin, enabled=False))
    assert version_moves(lambda: error_rule_delete(rule=rule))
    assert version_moves(lambda: restatement_rule_delete(rule=restatement))
    assert not version_moves(lambda: rule_set_enabled(rule=builtin, enabled=False))  # no change


def test_rules_for_snapshot_orders_operator_rules_first_and_skips_disabled(seeded: None) -> None:
    _operator_rule(provider="opencode", rule_id="late", position=900)
    _operator_rule(provider="opencode", rule_id="early", position=-5)
    off = _operator_rule(provider="opencode", rule_id="off")
    rule_set_enabled(rule=off, enabled=False)
    rule_set_enabled(
        rule=ProviderErrorRule.objects.get(
            provider="opencode", rule_id="opencode-400-model-unavailable"
        ),
        enabled=False,
    )
    first = {"rule_id": "first", "position": 1, "from_statuses": [400], "to_status": 503}
    restatement_rule_save(
        rule=StatusRestatementRule(provider="agentrouter", text_markers=["busy"]), fields=first
    )

    restatements, errors = rules_for_snapshot()

    assert [r.rule_id for r in errors["opencode"]] == [
        "early", "late",
        "opencode-endpoint-unavailable-400", "opencode-endpoint-unavailable-429",
        "opencode-monthly-quota-resets-in", "opencode-quota-exhausted-headers-requests",
        "opencode-quota-exhausted-headers-tokens", "opencode-quota-exhausted-body-organization",
        "opencode-quota-exhausted-body-account", "opencode-quota-exhausted-body-plan",
    ]  # fmt: skip
    assert [r.rule_id for r in restatements["agentrouter"]] == [
        "first", "agentrouter-quota-misstatus"
    ]  # fmt: skip
    assert errors["opencode"][0] == ErrorRule(
        provider="opencode", rule_id="early", status=429, position=-5
    )
