"""The rules admin: operator rules through services, built-in rows only enabled or disabled."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.apps import apps
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from resilience.models.rules import OPERATOR_RULES_MAX, ProviderErrorRule, StatusRestatementRule

pytestmark = pytest.mark.django_db

SEED = importlib.import_module("resilience.migrations.0003_rules")


@pytest.fixture
def seeded(db: None) -> None:
    """The built-in rows of ``0003_rules`` (re-seeded if a transactional test flushed them)."""
    if not ProviderErrorRule.objects.filter(is_builtin=True).exists():
        SEED.seed(apps, None)


@pytest.fixture
def builtin(seeded: None) -> ProviderErrorRule:
    """The seeded openrouter 402 rule."""
    return ProviderErrorRule.objects.get(rule_id="openrouter-credit-exhausted-402")


@pytest.fixture
def operator_rule(db: None) -> ProviderErrorRule:
    """An operator rule, saved directly."""
    return ProviderErrorRule.objects.create(provider="acme", rule_id="mine", status=429)


def _url(model: str, view: str, *args: Any) -> str:
    return reverse(f"admin:resilience_{model}_{view}", args=args)


def _messages(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def _error_rule_form(**overrides: Any) -> dict[str, Any]:
    return {
        "provider": "Acme",
        "rule_id": "acme-quota",
        "position": "0",
        "is_enabled": "on",
        "status": "429",
        "match": "Quota Exceeded",
        "header_name": "",
        "header_match": "equals",
        "header_value": "",
        "scope": "model",
        "reason": "quota_exhausted",
        "cooldown_ms": "90000",
        **overrides,
    }


@pytest.mark.parametrize("model", ["providererrorrule", "statusrestatementrule"])
def test_changelist_and_add_pages_render(seeded: None, staff_client: Client, model: str) -> None:
    changelist = staff_client.get(_url(model, "changelist"))

    assert changelist.status_code == 200
    assert "agentrouter" in changelist.content.decode()
    assert staff_client.get(_url(model, "add")).status_code == 200
    filtered = staff_client.get(_url(model, "changelist"), {"is_builtin__exact": "0"})
    assert filtered.status_code == 200


def test_changelist_shows_cooldown_and_header(seeded: None, staff_client: Client) -> None:
    page = staff_client.get(_url("providererrorrule", "changelist"), {"provider": "minimax"})

    text = page.content.decode()
    assert "x-model-quota-remaining contains &#x27;=0&#x27;" in text
    denied = staff_client.get(_url("providererrorrule", "changelist"), {"provider": "agentrouter"})
    assert ">6 h<" in denied.content.decode()


def test_operator_error_rule_added_through_the_admin(staff_client: Client) -> None:
    response = staff_client.post(_url("providererrorrule", "add"), _error_rule_form())

    assert response.status_code == 302
    rule = ProviderErrorRule.objects.get(rule_id="acme-quota")
    assert (rule.provider, rule.match, rule.scope, rule.cooldown_ms, rule.is_builtin) == (
        "acme",
        "Quota Exceeded",
        "model",
        90_000,
        False,
    )


def test_invalid_operator_rule_shows_the_form_errors(staff_client: Client) -> None:
    response = staff_client.post(
        _url("providererrorrule", "add"), _error_rule_form(header_name="x-quota", status="700")
    )

    assert response.status_code == 200
    page = response.content.decode()
    assert "Give both the header&#x27;s name and its value, or neither." in page
    assert "Ensure this value is less than or equal to 599." in page
    assert not ProviderErrorRule.objects.filter(rule_id="acme-quota").exists()


def test_operator_rule_cap_in_the_admin(staff_client: Client) -> None:
    ProviderErrorRule.objects.bulk_create(
        ProviderErrorRule(provider="acme", rule_id=f"r{i}", status=429)
        for i in range(OPERATOR_RULES_MAX)
    )

    response = staff_client.post(_url("providererrorrule", "add"), _error_rule_form())

    assert response.status_code == 200
    assert "At most 50 operator rules" in response.content.decode()
    assert ProviderErrorRule.objects.filter(is_builtin=False).count() == OPERATOR_RULES_MAX


def test_restatement_rule_added_through_the_admin(staff_client: Client) -> None:
    form = {
        "provider": "acme",
        "rule_id": "acme-misstatus",
        "position": "5",
        "is_enabled": "on",
        "from_statuses": "403, 400",
        "to_status": "429",
        "text_markers": "quota gone\nno balance",
        "exclude_markers": "",
        "default_retry_after_ms": "30000",
    }

    response = staff_client.post(_url("statusrestatementrule", "add"), form)

    assert response.status_code == 302
    rule = StatusRestatementRule.objects.get(rule_id="acme-misstatus")
    assert (rule.from_statuses, rule.text_markers, rule.exclude_markers) == (
        [403, 400],
        ["quota gone", "no balance"],
        [],
    )
    bad = staff_client.post(_url("statusrestatementrule", "add"), {**form, "from_statuses": "4x"})
    assert "Whole numbers only" in bad.content.decode()


def test_builtin_change_page_only_offers_is_enabled(
    staff_client: Client, builtin: ProviderErrorRule
) -> None:
    page = staff_client.get(_url("providererrorrule", "change", builtin.pk)).content.decode()

    assert 'name="is_enabled"' in page
    assert 'name="cooldown_ms"' not in page and 'name="match"' not in page
    assert "deletelink" not in page


def test_builtin_rule_can_be_disabled_not_edited(
    staff_client: Client, builtin: ProviderErrorRule
) -> None:
    form = _error_rule_form(provider="openrouter", rule_id=builtin.rule_id, cooldown_ms="1")
    form.pop("is_enabled")  # unchecked

    response = staff_client.post(_url("providererrorrule", "change", builtin.pk), form)

    assert response.status_code == 302
    builtin.refresh_from_db()
    assert (builtin.is_enabled, builtin.cooldown_ms, builtin.status, builtin.scope) == (
        False,
        120_000,
        402,
        "connection",
    )


def test_builtin_rule_cannot_be_deleted(staff_client: Client, builtin: ProviderErrorRule) -> None:
    single = staff_client.post(_url("providererrorrule", "delete", builtin.pk), {"post": "yes"})
    bulk = staff_client.post(
        _url("providererrorrule", "changelist"),
        {"action": "delete_selected", "_selected_action": [builtin.pk], "post": "yes"},
    )

    assert single.status_code == 403
    assert bulk.status_code == 403
    assert ProviderErrorRule.objects.filter(pk=builtin.pk).exists()
    restatement = StatusRestatementRule.objects.get()
    refused = staff_client.post(
        _url("statusrestatementrule", "delete", restatement.pk), {"post": "yes"}
    )
    assert refused.status_code == 403


def test_operator_rule_deleted_through_the_admin(
    staff_client: Client, operator_rule: ProviderErrorRule
) -> None:
    response = staff_client.post(
        _url("providererrorrule", "changelist"),
        {"action": "delete_selected", "_selected_action": [operator_rule.pk], "post": "yes"},
    )

    assert response.status_code == 302
    assert not ProviderErrorRule.objects.filter(pk=operator_rule.pk).exists()


def test_enable_and_disable_actions(
    staff_client: Client, builtin: ProviderErrorRule, operator_rule: ProviderErrorRule
) -> None:
    selected = [builtin.pk, operator_rule.pk]
    changelist = _url("providererrorrule", "changelist")

    disabled = staff_client.post(
        changelist, {"action": "disable_rules", "_selected_action": selected}, follow=True
    )

    assert _messages(disabled) == ["Disabled 2 rule(s)."]
    assert not ProviderErrorRule.objects.filter(pk__in=selected, is_enabled=True).exists()
    enabled = staff_client.post(
        changelist, {"action": "enable_rules", "_selected_action": [builtin.pk]}, follow=True
    )
    assert _messages(enabled) == ["Enabled 1 rule(s)."]
    builtin.refresh_from_db()
    operator_rule.refresh_from_db()
    assert (builtin.is_enabled, operator_rule.is_enabled) == (True, False)


def test_restatement_actions(seeded: None, staff_client: Client) -> None:
    rule = StatusRestatementRule.objects.get()

    response = staff_client.post(
        _url("statusrestatementrule", "changelist"),
        {"action": "disable_rules", "_selected_action": [rule.pk]},
        follow=True,
    )

    assert _messages(response) == ["Disabled 1 rule(s)."]
    rule.refresh_from_db()
    assert rule.is_enabled is False
