"""Rules in the database: the seed migration's rows, validation and caps, built-in rows that
can only be disabled, the services invalidating the snapshot, and the snapshot selector.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.apps import apps
from django.core.exceptions import ValidationError

from omniroute.core.config_version import config_local_version
from resilience.domain.rules import ErrorRule, Restated, apply_restatement, match_error_rule
from resilience.models.rules import OPERATOR_RULES_MAX, ProviderErrorRule, StatusRestatementRule
from resilience.selectors.rules import rules_for_snapshot
from resilience.services.rules import (
    error_rule_delete,
    error_rule_save,
    restatement_rule_delete,
    restatement_rule_save,
    rule_set_enabled,
)
from tests.resilience.rules_support import ORG, QUOTA_TEXT, SEED, SEEDED_ROWS

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
        before = config_local_version()
        with django_capture_on_commit_callbacks(execute=True):
            fn()
        return config_local_version() != before

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
        403,
        "无权访问模型",
        "model",
        "auth_error",
        21_600_000,
    )
    restatement = StatusRestatementRule.objects.get()
    assert (restatement.provider, restatement.rule_id, restatement.is_builtin) == (
        "agentrouter",
        "agentrouter-quota-misstatus",
        True,
    )
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
        "early",
        "late",
        "opencode-endpoint-unavailable-400",
        "opencode-endpoint-unavailable-429",
        "opencode-monthly-quota-resets-in",
        "opencode-quota-exhausted-headers-requests",
        "opencode-quota-exhausted-headers-tokens",
        "opencode-quota-exhausted-body-organization",
        "opencode-quota-exhausted-body-account",
        "opencode-quota-exhausted-body-plan",
    ]
    assert [r.rule_id for r in restatements["agentrouter"]] == [
        "first",
        "agentrouter-quota-misstatus",
    ]
    assert errors["opencode"][0] == ErrorRule(
        provider="opencode", rule_id="early", status=429, position=-5
    )
