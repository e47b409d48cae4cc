"""``/api/error-rules/`` and ``/api/restatement-rules/``: what the rules admin does, through the
API: operator rules created, edited, switched and deleted; built-in rules only switched."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from resilience.models.rules import ProviderErrorRule, StatusRestatementRule
from tests.resilience.rules_support import SEED

pytestmark = pytest.mark.django_db

ERRORS = "/api/error-rules/"
RESTATEMENTS = "/api/restatement-rules/"
AN_ERROR_RULE = {
    "provider": "acme",
    "rule_id": "credit-out",
    "status": 402,
    "match": "out of credit",
    "scope": "connection",
    "reason": "quota_exhausted",
    "cooldown_ms": 60_000,
}
A_RESTATEMENT = {
    "provider": "acme",
    "rule_id": "quota-403",
    "from_statuses": [403],
    "to_status": 429,
    "text_markers": ["quota"],
}


def _builtin_error_rule() -> ProviderErrorRule:
    row = SEED.ERROR_RULES[0]
    return ProviderErrorRule.objects.get(provider=row["provider"], rule_id=row["rule_id"])


def _error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.content
    error: dict[str, Any] = response.json()["error"]
    return error


def test_an_operator_error_rule_is_created_edited_and_deleted(manage_client: APIClient) -> None:
    created = manage_client.post(ERRORS, AN_ERROR_RULE, format="json")
    assert created.status_code == 201, created.content
    url = f"{ERRORS}{created.json()['id']}/"

    patched = manage_client.patch(url, {"match": "no credit left"}, format="json")
    deleted = manage_client.delete(url)

    assert patched.status_code == 200 and patched.json()["match"] == "no credit left"
    assert created.json()["is_builtin"] is False
    assert deleted.status_code == 204
    assert not ProviderErrorRule.objects.filter(rule_id="credit-out").exists()


def test_a_rule_the_model_refuses_is_a_400_naming_the_field(manage_client: APIClient) -> None:
    body = {**AN_ERROR_RULE, "header_name": "x-quota", "header_value": ""}

    error = _error(manage_client.post(ERRORS, body, format="json"), 400)

    assert "header_value" in error["fields"]
    assert not ProviderErrorRule.objects.filter(rule_id="credit-out").exists()


def test_is_builtin_cannot_be_set_through_the_api(manage_client: APIClient) -> None:
    response = manage_client.post(ERRORS, {**AN_ERROR_RULE, "is_builtin": True}, format="json")

    assert response.status_code == 201
    assert ProviderErrorRule.objects.get(rule_id="credit-out").is_builtin is False


def test_a_builtin_rule_is_enabled_and_disabled_but_never_edited_or_deleted(
    manage_client: APIClient,
) -> None:
    rule = _builtin_error_rule()
    url = f"{ERRORS}{rule.pk}/"

    disabled = manage_client.post(f"{url}disable/")
    switched_by_patch = manage_client.patch(url, {"is_enabled": True}, format="json")
    edited = manage_client.patch(url, {"match": "anything"}, format="json")
    deleted = manage_client.delete(url)

    assert disabled.status_code == 200 and disabled.json()["is_enabled"] is False
    assert switched_by_patch.status_code == 200 and switched_by_patch.json()["is_enabled"] is True
    assert "only be enabled or disabled" in _error(edited, 403)["message"]
    assert "match" in _error(edited, 403)["message"]
    assert _error(deleted, 403)["code"] == "permission_denied"
    rule.refresh_from_db()
    assert (rule.match, rule.is_enabled) == (SEED.ERROR_RULES[0].get("match", ""), True)


def test_enable_and_disable_an_operator_restatement_rule(manage_client: APIClient) -> None:
    created = manage_client.post(RESTATEMENTS, A_RESTATEMENT, format="json")
    assert created.status_code == 201, created.content
    url = f"{RESTATEMENTS}{created.json()['id']}/"

    off = manage_client.post(f"{url}disable/").json()
    on = manage_client.post(f"{url}enable/").json()

    assert (off["is_enabled"], on["is_enabled"]) == (False, True)
    assert StatusRestatementRule.objects.get(rule_id="quota-403").from_statuses == [403]


def test_an_operator_restatement_rule_is_replaced_edited_and_deleted(
    manage_client: APIClient,
) -> None:
    created = manage_client.post(RESTATEMENTS, A_RESTATEMENT, format="json")
    assert created.status_code == 201, created.content
    url = f"{RESTATEMENTS}{created.json()['id']}/"

    replaced = manage_client.put(url, {**A_RESTATEMENT, "to_status": 503}, format="json")
    patched = manage_client.patch(url, {"text_markers": ["quota", "limit"]}, format="json")
    deleted = manage_client.delete(url)

    assert replaced.status_code == 200 and replaced.json()["to_status"] == 503
    assert patched.status_code == 200 and patched.json()["text_markers"] == ["quota", "limit"]
    assert deleted.status_code == 204
    assert not StatusRestatementRule.objects.filter(rule_id="quota-403").exists()


def test_a_builtin_restatement_rule_cannot_be_deleted(manage_client: APIClient) -> None:
    rule = StatusRestatementRule.objects.filter(is_builtin=True).first()
    assert rule is not None

    _error(manage_client.delete(f"{RESTATEMENTS}{rule.pk}/"), 403)
    _error(manage_client.put(f"{RESTATEMENTS}{rule.pk}/", A_RESTATEMENT, format="json"), 403)

    assert StatusRestatementRule.objects.filter(pk=rule.pk).exists()


def test_the_list_pages_filters_like_the_admin_and_searches(manage_client: APIClient) -> None:
    manage_client.post(ERRORS, AN_ERROR_RULE, format="json")
    total = ProviderErrorRule.objects.count()

    first = manage_client.get(ERRORS, {"limit": 2}).json()
    mine = manage_client.get(ERRORS, {"is_builtin": "false"}).json()
    acme = manage_client.get(ERRORS, {"provider": "acme", "scope": "connection"}).json()
    found = manage_client.get(ERRORS, {"search": "out of credit"}).json()

    assert first["count"] == total and len(first["results"]) == 2 and first["next"]
    assert [r["rule_id"] for r in mine["results"]] == ["credit-out"]
    assert [r["rule_id"] for r in acme["results"]] == ["credit-out"]
    assert [r["rule_id"] for r in found["results"]] == ["credit-out"]
    assert "is_builtin" in _error(manage_client.get(ERRORS, {"is_builtin": "maybe"}), 400)["fields"]


def test_pages_are_stable_and_bounded(manage_client: APIClient) -> None:
    every = [r["id"] for r in manage_client.get(ERRORS, {"limit": 500}).json()["results"]]
    paged = [
        r["id"]
        for offset in range(0, len(every), 7)
        for r in manage_client.get(ERRORS, {"limit": 7, "offset": offset}).json()["results"]
    ]
    huge = manage_client.get(ERRORS, {"limit": 100_000}).json()

    assert paged == every
    assert len(huge["results"]) <= 500


def test_rules_need_an_operator(plain_client: APIClient, api_client: APIClient) -> None:
    assert plain_client.get(ERRORS).status_code == 403
    assert api_client.post(ERRORS, AN_ERROR_RULE, format="json").status_code in (401, 403)


@pytest.mark.parametrize(
    ("url", "payload", "field"),
    [
        (ERRORS, {**AN_ERROR_RULE, "cooldown_ms": 7 * 86_400_000 + 1}, "cooldown_ms"),
        (ERRORS, {**AN_ERROR_RULE, "cooldown_ms": 2**62}, "cooldown_ms"),
        (
            RESTATEMENTS,
            {**A_RESTATEMENT, "default_retry_after_ms": 2**62},
            "default_retry_after_ms",
        ),
    ],
)
def test_a_cooldown_past_its_bound_is_refused_on_the_field(
    manage_client: APIClient, url: str, payload: dict[str, Any], field: str
) -> None:
    """Stored, 2**62 ms made a lock past year 9999: the connections list and every state
    write then failed."""
    error = _error(manage_client.post(url, payload, format="json"), 400)

    assert field in error["fields"]
