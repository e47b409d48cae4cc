"""The ``requestQueue`` section of the settings document (docs/configuration.md):
defaults, environment, lenient resolve, strict patches through the API, the admin page."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from omniroute.core.settings import SETTINGS, SettingsError, flatten
from resilience.admin.settings import field_name
from resilience.domain.request_queue import RequestQueueSettings
from resilience.models import ResilienceSettings as ResilienceSettingsRow
from resilience.services import resilience_settings_document
from routing.domain.settings.sections import REQUEST_QUEUE

NO_ENV: dict[str, str] = {}
URL = "/api/resilience"
DEFAULT_DOCUMENT = {
    "autoEnableApiKeyProviders": False,
    "requestsPerMinute": 100,
    "minTimeBetweenRequestsMs": 200,
    "concurrentRequests": 10,
    "globalConcurrentRequests": 0,
    "maxWaitMs": 15_000,
    "maxQueueDepth": 0,
}


def _queue(stored: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> Any:
    return SETTINGS.resolve({"requestQueue": stored or {}}, env or NO_ENV)[REQUEST_QUEUE]


def _errors(patch: Any) -> dict[str, str]:
    try:
        SETTINGS.validate_patch(patch, SETTINGS.render(SETTINGS.resolve({}, NO_ENV)))
    except SettingsError as error:
        return error.errors
    return {}


# --- defaults and helpers ----------------------------------------------------------------------


def test_the_defaults() -> None:
    settings = SETTINGS.resolve({}, NO_ENV)

    assert settings[REQUEST_QUEUE] == RequestQueueSettings(
        auto_enable_api_key_providers=False,  # off here: on in the reference
        requests_per_minute=100,
        min_time_between_requests_ms=200,
        concurrent_requests=10,
        global_concurrent_requests=0,
        max_wait_ms=15_000,
        max_queue_depth=0,
    )
    assert (
        settings[REQUEST_QUEUE] == RequestQueueSettings()
    )  # the dataclass agrees with SETTINGS.schema.fields
    assert SETTINGS.render(settings)["requestQueue"] == DEFAULT_DOCUMENT


def test_a_document_without_the_section_gets_its_defaults() -> None:
    resolved = SETTINGS.resolve({"modelLockout": {"maxBackoffSteps": 3}}, NO_ENV)
    assert resolved[REQUEST_QUEUE] == RequestQueueSettings()


def test_the_helpers() -> None:
    queue = RequestQueueSettings(
        max_wait_ms=2_500, min_time_between_requests_ms=50, global_concurrent_requests=40
    )

    assert (queue.max_wait_seconds, queue.min_time_between_requests_seconds) == (2.5, 0.05)
    assert queue.global_concurrency_limit == 40
    assert RequestQueueSettings().global_concurrency_limit is None  # 0 = no whole-process cap


@pytest.mark.parametrize(
    ("depth", "queued", "admitted"),
    [(0, 10_000, True), (3, 0, True), (3, 2, True), (3, 3, False), (3, 7, False), (1, 1, False)],
)
def test_admission_against_the_queue_depth(depth: int, queued: int, admitted: bool) -> None:
    assert RequestQueueSettings(max_queue_depth=depth).admits(queued) is admitted


# --- environment -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("true", True),
        ("1", True),
        (" YES ", True),
        ("on", True),
        ("false", False),
        ("0", False),
        ("No", False),
        ("off", False),
        ("", False),
        ("maybe", False),
    ],
)
def test_auto_enable_is_seeded_by_env(raw: str, expected: bool) -> None:
    assert _queue(env={"RATE_LIMIT_AUTO_ENABLE": raw}).auto_enable_api_key_providers is expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("5000", 5_000),
        ("2.5e3", 2_500),
        ("0", 1),  # clamped into 1..30 000
        ("120000", 30_000),  # the reference's old default: clamped
        ("soon", 15_000),  # not a number: the plain default
        ("", 15_000),
    ],
)
def test_max_wait_is_seeded_by_env_and_clamped(raw: str, expected: int) -> None:
    assert _queue(env={"RATE_LIMIT_MAX_WAIT_MS": raw}).max_wait_ms == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("50", 50), ("-3", 0), ("250000", 100_000), ("deep", 0)],
)
def test_max_queue_depth_is_seeded_by_env_and_clamped(raw: str, expected: int) -> None:
    assert _queue(env={"RATE_LIMIT_MAX_QUEUE_DEPTH": raw}).max_queue_depth == expected


def test_env_moves_only_its_own_fields() -> None:
    env = {"RATE_LIMIT_AUTO_ENABLE": "on", "RATE_LIMIT_MAX_WAIT_MS": "9000"}
    assert _queue(env=env) == RequestQueueSettings(
        auto_enable_api_key_providers=True, max_wait_ms=9_000
    )


def test_a_stored_value_wins_over_env() -> None:
    stored = {"autoEnableApiKeyProviders": False, "maxWaitMs": 2_000, "maxQueueDepth": 5}
    env = {
        "RATE_LIMIT_AUTO_ENABLE": "true",
        "RATE_LIMIT_MAX_WAIT_MS": "9000",
        "RATE_LIMIT_MAX_QUEUE_DEPTH": "50",
    }
    queue = _queue(stored, env)
    assert (queue.auto_enable_api_key_providers, queue.max_wait_ms, queue.max_queue_depth) == (
        False,
        2_000,
        5,
    )


# --- lenient resolve of a stored document ------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "stored", "expected"),
    [
        ("requestsPerMinute", 0, 1),
        ("requestsPerMinute", 5_000_000, 1_000_000),
        ("minTimeBetweenRequestsMs", -1, 0),
        ("minTimeBetweenRequestsMs", 10_000_000, 3_600_000),
        ("concurrentRequests", 0, 1),
        ("concurrentRequests", 50_000, 10_000),
        ("globalConcurrentRequests", -5, 0),
        ("globalConcurrentRequests", 200_000, 100_000),
        ("maxWaitMs", 0, 1),
        ("maxWaitMs", 600_000, 30_000),
        ("maxQueueDepth", -1, 0),
        ("maxQueueDepth", 1_000_000, 100_000),
        ("maxWaitMs", "2500", 2_500),  # numeric strings and floats: truncated ("toInteger")
        ("requestsPerMinute", 60.9, 60),
    ],
)
def test_stored_numbers_are_clamped(key: str, stored: Any, expected: int) -> None:
    document = SETTINGS.render(SETTINGS.resolve({"requestQueue": {key: stored}}, NO_ENV))
    assert document["requestQueue"] == {**DEFAULT_DOCUMENT, key: expected}


@pytest.mark.parametrize("garbage", ["soon", None, [], {}, True, "1_000"])
@pytest.mark.parametrize("key", [k for k, v in DEFAULT_DOCUMENT.items() if not isinstance(v, bool)])
def test_stored_garbage_keeps_the_default(key: str, garbage: Any) -> None:
    document = SETTINGS.render(SETTINGS.resolve({"requestQueue": {key: garbage}}, NO_ENV))
    assert document["requestQueue"][key] == DEFAULT_DOCUMENT[key]


@pytest.mark.parametrize("garbage", ["true", "yes", 1, None, []])
def test_a_stored_auto_enable_must_be_a_real_boolean(garbage: Any) -> None:
    env = {"RATE_LIMIT_AUTO_ENABLE": "off"}
    assert (
        _queue({"autoEnableApiKeyProviders": garbage}, env).auto_enable_api_key_providers is False
    )
    assert _queue({"autoEnableApiKeyProviders": True}, env).auto_enable_api_key_providers is True


def test_a_section_that_is_not_an_object_keeps_every_default() -> None:
    settings = SETTINGS.resolve({"requestQueue": [1, 2]}, NO_ENV)
    assert settings[REQUEST_QUEUE] == RequestQueueSettings()


def test_the_document_round_trips() -> None:
    stored = {"requestQueue": {"autoEnableApiKeyProviders": True, "maxQueueDepth": 30}}
    document = SETTINGS.render(SETTINGS.resolve(stored, NO_ENV))

    assert document["requestQueue"] == {
        **DEFAULT_DOCUMENT,
        "autoEnableApiKeyProviders": True,
        "maxQueueDepth": 30,
    }
    assert SETTINGS.resolve(document, NO_ENV) == SETTINGS.resolve(stored, NO_ENV)


# --- strict patches ----------------------------------------------------------------------------

REJECTED = [
    ({"executionMaxWaitMs": 600_000}, "executionMaxWaitMs", "unknown key"),  # maxWaitMs covers it
    ({"maxWaitMs": 0}, "maxWaitMs", "must be between 1 and 30000"),
    ({"maxWaitMs": 30_001}, "maxWaitMs", "must be between 1 and 30000"),
    ({"maxWaitMs": "15000"}, "maxWaitMs", "must be an integer"),
    ({"maxWaitMs": 1.5}, "maxWaitMs", "must be an integer"),
    ({"maxWaitMs": None}, "maxWaitMs", "must be an integer"),
    ({"maxQueueDepth": -1}, "maxQueueDepth", "must be between 0 and 100000"),
    ({"maxQueueDepth": True}, "maxQueueDepth", "must be an integer"),
    ({"requestsPerMinute": 0}, "requestsPerMinute", "must be between 1 and 1000000"),
    (
        {"minTimeBetweenRequestsMs": 3_600_001},
        "minTimeBetweenRequestsMs",
        "must be between 0 and 3600000",
    ),
    ({"concurrentRequests": 10_001}, "concurrentRequests", "must be between 1 and 10000"),
    ({"globalConcurrentRequests": -1}, "globalConcurrentRequests", "must be between 0 and 100000"),
    ({"autoEnableApiKeyProviders": "yes"}, "autoEnableApiKeyProviders", "must be a boolean"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("section", "key", "message"), REJECTED)
def test_the_api_rejects_a_bad_value(
    manage_client: APIClient, section: dict[str, Any], key: str, message: str
) -> None:
    response = manage_client.patch(URL, {"requestQueue": section}, format="json")

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", "invalid_settings")
    assert error["fields"] == {f"requestQueue.{key}": message}
    assert f"requestQueue.{key}" in error["message"]
    assert not ResilienceSettingsRow.objects.exists()


def test_every_bad_field_is_named_and_a_section_must_be_an_object() -> None:
    patch = {"requestQueue": {"maxWaitMs": 0, "maxQueueDepth": -1, "concurrentRequests": 5}}
    assert _errors(patch) == {
        "requestQueue.maxWaitMs": "must be between 1 and 30000",
        "requestQueue.maxQueueDepth": "must be between 0 and 100000",
    }
    assert _errors({"requestQueue": 15_000}) == {"requestQueue": "must be an object"}


def test_the_bounds_themselves_are_accepted() -> None:
    low = {
        "requestsPerMinute": 1,
        "minTimeBetweenRequestsMs": 0,
        "concurrentRequests": 1,
        "globalConcurrentRequests": 0,
        "maxWaitMs": 1,
        "maxQueueDepth": 0,
    }
    high = {
        "requestsPerMinute": 1_000_000,
        "minTimeBetweenRequestsMs": 3_600_000,
        "concurrentRequests": 10_000,
        "globalConcurrentRequests": 100_000,
        "maxWaitMs": 30_000,
        "maxQueueDepth": 100_000,
    }
    assert _errors({"requestQueue": low}) == {}
    assert _errors({"requestQueue": high}) == {}


# --- the API and the admin page ----------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_env")
def test_a_patch_round_trips_through_get(manage_client: APIClient) -> None:
    patch = {"requestQueue": {"autoEnableApiKeyProviders": True, "maxWaitMs": 30_000}}

    response = manage_client.patch(URL, patch, format="json")

    assert response.status_code == 200, response.content
    assert response.json()["ok"] is True
    expected = {**DEFAULT_DOCUMENT, "autoEnableApiKeyProviders": True, "maxWaitMs": 30_000}
    assert response.json()["requestQueue"] == expected
    assert ResilienceSettingsRow.objects.get().document == patch  # only what was set is stored

    manage_client.patch(URL, {"requestQueue": {"maxQueueDepth": 25}}, format="json")

    assert manage_client.get(URL).json()["requestQueue"] == {**expected, "maxQueueDepth": 25}


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_env")
def test_the_admin_page_edits_the_section(staff_client: Client) -> None:
    change_url = reverse("admin:resilience_resiliencesettings_change", args=[1])
    values = {**flatten(resilience_settings_document()), "requestQueue.maxQueueDepth": 40}
    values["requestQueue.autoEnableApiKeyProviders"] = True
    form = {field_name(p): v for p, v in values.items() if not isinstance(v, bool | None)}
    form.update({field_name(p): "on" for p, v in values.items() if v is True})

    page = staff_client.get(change_url).content.decode()
    response = staff_client.post(change_url, {**form, "_save": "Save"})

    assert "requestQueue.globalConcurrentRequests" in page
    assert response.status_code == 302, response.content
    assert ResilienceSettingsRow.objects.get().document == {
        "requestQueue": {"autoEnableApiKeyProviders": True, "maxQueueDepth": 40}
    }


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_env")
def test_the_admin_page_refuses_an_out_of_range_wait(staff_client: Client) -> None:
    change_url = reverse("admin:resilience_resiliencesettings_change", args=[1])
    values = {**flatten(resilience_settings_document()), "requestQueue.maxWaitMs": 30_001}
    form = {field_name(p): v for p, v in values.items() if not isinstance(v, bool | None)}
    form.update({field_name(p): "on" for p, v in values.items() if v is True})

    response = staff_client.post(change_url, {**form, "_save": "Save"})

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors == {field_name("requestQueue.maxWaitMs"): ["must be between 1 and 30000"]}
    assert not ResilienceSettingsRow.objects.exists()
