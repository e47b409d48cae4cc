"""Everything the admin does, the management API does.

The admin's registered pages of the project's apps are enumerated: for each one whether it
adds, changes and deletes rows, each of its actions and each extra URL it serves (the buttons
of a change page, "Clear all pins", "Unlock"). Every one of them must be in :data:`PARITY`,
which names the API route doing the same and the API test that shows it. A new admin action
(or a page that starts to allow adding) without a row here fails this test; so does a row left
behind by an admin that no longer does it, a route that does not exist or does not take the
method, and a test that is not there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.test import RequestFactory
from django.urls import Resolver404, resolve

from omniroute.views import api_not_found

APPS = ("routing", "resilience", "leases", "requestlog")
STANDARD_URLS = {"changelist", "add", "change", "delete", "history", "autocomplete"}
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Route:
    """An API route (``{id}`` and the like stand for a value) and the test that drives it."""

    method: str
    path: str
    test: str  # "tests/<app>/test_x.py::test_name"


# (model, what the admin does) → the API route that does the same
PARITY: dict[tuple[str, str], Route] = {
    # routing: configuration
    ("routing.Provider", "add"): Route(
        "POST", "/api/providers/", "tests/routing/test_api_connections.py::test_provider_crud"
    ),
    ("routing.Provider", "change"): Route(
        "PATCH",
        "/api/providers/{slug}/",
        "tests/routing/test_api_connections.py::test_provider_crud",
    ),
    ("routing.Provider", "delete"): Route(
        "DELETE",
        "/api/providers/{slug}/",
        "tests/routing/test_api_connections.py::test_provider_crud",
    ),
    ("routing.Provider", "action:delete_selected"): Route(
        "DELETE",
        "/api/providers/{slug}/",
        "tests/routing/test_api_connections.py::test_provider_crud",
    ),
    ("routing.ProviderConnection", "add"): Route(
        "POST",
        "/api/connections/",
        "tests/routing/test_api_connections.py::test_connection_create_keeps_secret_write_only",
    ),
    ("routing.ProviderConnection", "change"): Route(
        "PATCH",
        "/api/connections/{id}/",
        "tests/routing/test_api_connections.py::test_connection_update_keeps_rotates_and_clears_the_secret",
    ),
    ("routing.ProviderConnection", "delete"): Route(
        "DELETE",
        "/api/connections/{id}/",
        "tests/routing/test_api_connections.py::test_connection_delete",
    ),
    ("routing.ProviderConnection", "action:delete_selected"): Route(
        "DELETE",
        "/api/connections/{id}/",
        "tests/routing/test_api_connections.py::test_connection_delete",
    ),
    ("routing.ProviderConnection", "action:clear_errors"): Route(
        "POST",
        "/api/connections/{id}/clear_error/",
        "tests/routing/test_connection_admin_actions.py::test_api_clear_error_clears_the_store",
    ),
    ("routing.ProviderConnection", "url:clear_cooldown"): Route(
        "POST",
        "/api/connections/{id}/clear_error/",
        "tests/routing/test_connection_admin_actions.py::test_api_clear_error_clears_the_store",
    ),
    ("routing.ProviderConnection", "action:reset_terminal"): Route(
        "POST",
        "/api/connections/{id}/reset_terminal/",
        "tests/routing/test_connection_admin_actions.py::test_api_reset_terminal",
    ),
    ("routing.ProviderConnection", "url:reset_terminal"): Route(
        "POST",
        "/api/connections/{id}/reset_terminal/",
        "tests/routing/test_connection_admin_actions.py::test_api_reset_terminal",
    ),
    ("routing.ProviderConnection", "url:unlock"): Route(  # {provider, model?, connectionId}
        "DELETE",
        "/api/resilience/model-cooldowns",
        "tests/resilience/test_lockout_api.py::test_delete_all_of_one_connection_keeps_the_others",
    ),
    ("routing.ClientApiKey", "add"): Route(
        "POST",
        "/api/keys/",
        "tests/routing/test_api_keys.py::test_key_create_returns_the_plaintext_once",
    ),
    ("routing.ClientApiKey", "change"): Route(
        "PATCH", "/api/keys/{id}/", "tests/routing/test_api_keys.py::test_key_update"
    ),
    ("routing.ClientApiKey", "delete"): Route(
        "DELETE", "/api/keys/{id}/", "tests/routing/test_api_keys.py::test_deleted_key_gets_401"
    ),
    ("routing.ClientApiKey", "action:delete_selected"): Route(
        "DELETE", "/api/keys/{id}/", "tests/routing/test_api_keys.py::test_deleted_key_gets_401"
    ),
    ("routing.ClientApiKey", "action:revoke_keys"): Route(
        "POST",
        "/api/keys/{id}/revoke/",
        "tests/routing/test_api_keys.py::test_revoked_key_gets_401",
    ),
    ("routing.Combo", "add"): Route(
        "POST",
        "/api/combos/",
        "tests/routing/test_api_combos.py::test_combo_crud_with_nested_targets",
    ),
    ("routing.Combo", "change"): Route(
        "PUT",
        "/api/combos/{id}/",
        "tests/routing/test_api_combos.py::test_combo_crud_with_nested_targets",
    ),
    ("routing.Combo", "delete"): Route(
        "DELETE",
        "/api/combos/{id}/",
        "tests/routing/test_api_combos.py::test_combo_crud_with_nested_targets",
    ),
    ("routing.Combo", "action:delete_selected"): Route(
        "DELETE",
        "/api/combos/{id}/",
        "tests/routing/test_api_combos.py::test_combo_crud_with_nested_targets",
    ),
    ("routing.ModelCatalogEntry", "add"): Route(
        "POST", "/api/model-catalog/", "tests/routing/test_catalog.py::test_api_crud"
    ),
    ("routing.ModelCatalogEntry", "change"): Route(
        "PATCH", "/api/model-catalog/{id}/", "tests/routing/test_catalog.py::test_api_crud"
    ),
    ("routing.ModelCatalogEntry", "delete"): Route(
        "DELETE", "/api/model-catalog/{id}/", "tests/routing/test_catalog.py::test_api_crud"
    ),
    ("routing.ModelCatalogEntry", "action:delete_selected"): Route(
        "DELETE", "/api/model-catalog/{id}/", "tests/routing/test_catalog.py::test_api_crud"
    ),
    # routing: runtime
    ("routing.FeatureFlag", "add"): Route(
        "POST",
        "/api/feature-flags/",
        "tests/routing/test_flags_api.py::test_set_change_and_clear_the_emergency_fallback",
    ),
    ("routing.FeatureFlag", "change"): Route(
        "PATCH",
        "/api/feature-flags/{name}/",
        "tests/routing/test_flags_api.py::test_set_change_and_clear_the_emergency_fallback",
    ),
    ("routing.FeatureFlag", "delete"): Route(
        "DELETE",
        "/api/feature-flags/{name}/",
        "tests/routing/test_flags_api.py::test_set_change_and_clear_the_emergency_fallback",
    ),
    ("routing.FeatureFlag", "action:delete_selected"): Route(
        "DELETE",
        "/api/feature-flags/{name}/",
        "tests/routing/test_flags_api.py::test_set_change_and_clear_the_emergency_fallback",
    ),
    ("routing.SessionAffinityPin", "action:clear_pins"): Route(
        "POST",
        "/api/affinity-pins/clear/",
        "tests/routing/test_affinity_api.py::test_clear_the_selected_pins",
    ),
    ("routing.SessionAffinityPin", "url:clear_all"): Route(
        "POST",
        "/api/affinity-pins/clear-all/",
        "tests/routing/test_affinity_api.py::test_clear_every_pin",
    ),
    # resilience
    ("resilience.ProviderErrorRule", "add"): Route(
        "POST",
        "/api/error-rules/",
        "tests/resilience/test_rules_api.py::test_an_operator_error_rule_is_created_edited_and_deleted",
    ),
    ("resilience.ProviderErrorRule", "change"): Route(
        "PATCH",
        "/api/error-rules/{id}/",
        "tests/resilience/test_rules_api.py::test_an_operator_error_rule_is_created_edited_and_deleted",
    ),
    ("resilience.ProviderErrorRule", "delete"): Route(
        "DELETE",
        "/api/error-rules/{id}/",
        "tests/resilience/test_rules_api.py::test_an_operator_error_rule_is_created_edited_and_deleted",
    ),
    ("resilience.ProviderErrorRule", "action:delete_selected"): Route(
        "DELETE",
        "/api/error-rules/{id}/",
        "tests/resilience/test_rules_api.py::test_an_operator_error_rule_is_created_edited_and_deleted",
    ),
    ("resilience.ProviderErrorRule", "action:enable_rules"): Route(
        "POST",
        "/api/error-rules/{id}/enable/",
        "tests/resilience/test_rules_api.py::test_a_builtin_rule_is_enabled_and_disabled_but_never_edited_or_deleted",
    ),
    ("resilience.ProviderErrorRule", "action:disable_rules"): Route(
        "POST",
        "/api/error-rules/{id}/disable/",
        "tests/resilience/test_rules_api.py::test_a_builtin_rule_is_enabled_and_disabled_but_never_edited_or_deleted",
    ),
    ("resilience.StatusRestatementRule", "add"): Route(
        "POST",
        "/api/restatement-rules/",
        "tests/resilience/test_rules_api.py::test_enable_and_disable_an_operator_restatement_rule",
    ),
    ("resilience.StatusRestatementRule", "change"): Route(
        "PUT",
        "/api/restatement-rules/{id}/",
        "tests/resilience/test_rules_api.py::test_an_operator_restatement_rule_is_replaced_edited_and_deleted",
    ),
    ("resilience.StatusRestatementRule", "delete"): Route(
        "DELETE",
        "/api/restatement-rules/{id}/",
        "tests/resilience/test_rules_api.py::test_an_operator_restatement_rule_is_replaced_edited_and_deleted",
    ),
    ("resilience.StatusRestatementRule", "action:delete_selected"): Route(
        "DELETE",
        "/api/restatement-rules/{id}/",
        "tests/resilience/test_rules_api.py::test_a_builtin_restatement_rule_cannot_be_deleted",
    ),
    ("resilience.StatusRestatementRule", "action:enable_rules"): Route(
        "POST",
        "/api/restatement-rules/{id}/enable/",
        "tests/resilience/test_rules_api.py::test_enable_and_disable_an_operator_restatement_rule",
    ),
    ("resilience.StatusRestatementRule", "action:disable_rules"): Route(
        "POST",
        "/api/restatement-rules/{id}/disable/",
        "tests/resilience/test_rules_api.py::test_enable_and_disable_an_operator_restatement_rule",
    ),
    ("resilience.CircuitBreaker", "action:reset_breakers"): Route(
        "POST",
        "/api/breakers/reset/",
        "tests/resilience/test_breakers_api.py::test_reset_the_named_breakers_or_all_of_them",
    ),
    ("resilience.CircuitBreaker", "delete"): Route(
        "DELETE",
        "/api/breakers/{name}/",
        "tests/resilience/test_breakers_api.py::test_delete_forgets_one_breaker_record_and_row",
    ),
    ("resilience.CircuitBreaker", "action:delete_selected"): Route(
        "DELETE",
        "/api/breakers/{name}/",
        "tests/resilience/test_breakers_api.py::test_delete_forgets_one_breaker_record_and_row",
    ),
    ("resilience.ModelCooldown", "change"): Route(  # the page: see and unlock the locks
        "GET",
        "/api/resilience/model-cooldowns",
        "tests/resilience/test_lockout_api.py::test_get_lists_the_locks_longest_first",
    ),
    ("resilience.ModelCooldown", "url:unlock"): Route(  # {"all": true} or {provider, model}
        "DELETE",
        "/api/resilience/model-cooldowns",
        "tests/resilience/test_lockout_api.py::test_delete_all",
    ),
    ("resilience.ResilienceSettings", "change"): Route(
        "PATCH",
        "/api/resilience",
        "tests/resilience/test_settings_api.py::test_patch_persists_and_moves_the_snapshot_version",
    ),
    # the request log: a request's page found by the id the client got (the dashboard's links)
    ("requestlog.RequestLogEntry", "url:by_request_id"): Route(
        "GET",
        "/api/requests/{id}/",
        "tests/core/observability/test_request_log_api.py::test_one_request_by_its_id_with_its_trail",
    ),
    # leases
    ("leases.ExclusiveConnectionLease", "action:revoke_leases"): Route(
        "POST",
        "/api/sessions/{sessionId}/revoke",
        "tests/leases/test_sessions_api.py::test_revoke_ends_the_lease_with_the_operators_reason",
    ),
}


# Read-only pages (the request log's): what the admin's list and a row's page show, the API
# lists and shows. A read-only page of these apps without both rows fails the test below.
READ_ONLY_APPS = ("requestlog",)
READ_ONLY: dict[tuple[str, str], Route] = {
    ("requestlog.RequestLogEntry", "list"): Route(
        "GET",
        "/api/requests/",
        "tests/core/observability/test_request_log_api.py::test_the_list_filters_by_the_admins_fields",
    ),
    ("requestlog.RequestLogEntry", "view"): Route(
        "GET",
        "/api/requests/{id}/",
        "tests/core/observability/test_request_log_api.py::test_one_request_by_its_id_with_its_trail",
    ),
}


def _superuser_request() -> Any:
    request = RequestFactory().get("/admin/")
    request.user = User(is_superuser=True, is_staff=True, is_active=True)
    return request


def _admin_does(model_admin: Any, request: Any) -> set[str]:
    """What a superuser can do on one admin page: add/change/delete, actions, extra URLs."""
    done = {
        verb
        for verb, allowed in (
            ("add", model_admin.has_add_permission(request)),
            ("change", model_admin.has_change_permission(request)),
            ("delete", model_admin.has_delete_permission(request)),
        )
        if allowed
    }
    done |= {f"action:{name}" for name in model_admin.get_actions(request)}
    prefix = f"{model_admin.opts.app_label}_{model_admin.opts.model_name}_"
    names = (getattr(pattern, "name", None) or "" for pattern in model_admin.get_urls())
    extra = {name.removeprefix(prefix) for name in names if name.startswith(prefix)}
    return done | {f"url:{name}" for name in extra - STANDARD_URLS}


def admin_capabilities() -> set[tuple[str, str]]:
    """Every (model label, capability) of the project apps' admin pages."""
    request = _superuser_request()
    return {
        (model._meta.label, capability)
        for model, model_admin in admin.site._registry.items()
        if model._meta.app_label in APPS
        for capability in _admin_does(model_admin, request)
    }


@pytest.mark.django_db
def test_every_admin_capability_has_an_api_route() -> None:
    missing = sorted(admin_capabilities() - set(PARITY))

    assert not missing, f"admin capabilities with no API route in PARITY: {missing}"


def read_only_pages() -> set[tuple[str, str]]:
    """(model label, "list"/"view") of the read-only admin pages of :data:`READ_ONLY_APPS`."""
    request = _superuser_request()
    return {
        (model._meta.label, capability)
        for model, model_admin in admin.site._registry.items()
        if model._meta.app_label in READ_ONLY_APPS and model_admin.has_view_permission(request)
        for capability in ("list", "view")
    }


@pytest.mark.django_db
def test_every_read_only_page_lists_and_shows_through_the_api() -> None:
    assert read_only_pages() == set(READ_ONLY)


@pytest.mark.django_db
def test_no_mapping_outlives_its_admin_capability() -> None:
    stale = sorted(set(PARITY) - admin_capabilities())

    assert not stale, f"PARITY rows whose admin capability is gone: {stale}"


def _sample(path: str) -> str:
    return re.sub(r"\{sessionId\}", "lease:1", re.sub(r"\{(id|slug|name)\}", "1", path))


def _takes(match: Any, method: str) -> bool:
    actions = getattr(match.func, "actions", None)
    if actions is not None:  # a viewset: its method → action map for this route
        return method.lower() in actions
    view_class = getattr(match.func, "view_class", None) or getattr(match.func, "cls", None)
    return view_class is not None and hasattr(view_class, method.lower())


@pytest.mark.parametrize(
    ("capability", "route"), {**PARITY, **READ_ONLY}.items(), ids=lambda v: str(v)
)
def test_each_route_exists_and_takes_its_method(capability: tuple[str, str], route: Route) -> None:
    try:
        match = resolve(_sample(route.path))
    except Resolver404:
        pytest.fail(f"{route.path} is no route")
    assert match.func is not api_not_found, route.path
    assert _takes(match, route.method), f"{route.method} {route.path}"


@pytest.mark.parametrize("route", [*PARITY.values(), *READ_ONLY.values()], ids=lambda r: r.test)
def test_each_route_has_its_api_test(route: Route) -> None:
    file, _, name = route.test.partition("::")
    source = (ROOT / file).read_text()

    assert re.search(rf"^def {name}\(", source, re.MULTILINE), route.test


def test_the_api_root_lists_the_new_areas(admin_client: Any) -> None:
    # The root is an operator's page (a staff session here).
    listed = admin_client.get("/api/", HTTP_ACCEPT="application/json").json()

    for area in (
        "error-rules",
        "restatement-rules",
        "breakers",
        "affinity-pins",
        "feature-flags",
        "sessions",
        "requests",
    ):
        assert area in listed, area
