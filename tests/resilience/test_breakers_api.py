"""``/api/breakers/``: the breakers the admin lists, with their transitions, reset one by one,
by name or all at once through the admin's service."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from rest_framework.test import APIClient

from omniroute.core.store import StateStore
from resilience.models import CircuitBreaker
from resilience.services.breakers import breaker_list
from tests.resilience.conftest import FailProvider

pytestmark = pytest.mark.django_db

URL = "/api/breakers/"


def _live(store: StateStore) -> dict[str, str]:
    return {name: b.state.value for name, b in async_to_sync(breaker_list)(store=store).items()}


def test_the_list_shows_each_breaker_with_its_transitions(
    manage_client: APIClient, fail_provider: FailProvider
) -> None:
    fail_provider("openai")
    fail_provider("anthropic", times=7)

    listed = manage_client.get(URL).json()
    opened = manage_client.get(f"{URL}openai/").json()

    assert listed["count"] == 2
    assert [(b["name"], b["state"]) for b in listed["results"]] == [
        ("anthropic", "degraded"),
        ("openai", "open"),
    ]
    steps = [(s["from"], s["to"], s["reason"]) for s in opened["status"]["transitionHistory"]]
    assert steps == [("closed", "degraded", "degraded"), ("degraded", "open", "threshold")]
    assert opened["status"]["retryAfterMs"] > 0


def test_the_list_filters_on_state_and_searches_names(
    manage_client: APIClient, fail_provider: FailProvider
) -> None:
    fail_provider("openai")
    fail_provider("anthropic", times=7)

    opened = manage_client.get(URL, {"state": "open"}).json()["results"]
    found = manage_client.get(URL, {"search": "anthro"}).json()["results"]

    assert [b["name"] for b in opened] == ["openai"]
    assert [b["name"] for b in found] == ["anthropic"]


def test_reset_one_breaker(
    manage_client: APIClient, fail_provider: FailProvider, process_store: StateStore
) -> None:
    fail_provider("openai")
    fail_provider("anthropic", times=7)

    response = manage_client.post(f"{URL}openai/reset/")

    assert response.status_code == 200 and response.json()["state"] == "closed"
    assert _live(process_store) == {"openai": "closed", "anthropic": "degraded"}
    assert dict(CircuitBreaker.objects.values_list("name", "state"))["openai"] == "closed"


def test_reset_the_named_breakers_or_all_of_them(
    manage_client: APIClient, fail_provider: FailProvider, process_store: StateStore
) -> None:
    for name in ("openai", "anthropic", "gemini"):
        fail_provider(name)

    named = manage_client.post(f"{URL}reset/", {"names": ["gemini"]}, format="json")
    assert named.json() == {"ok": True, "resetCount": 1}
    assert _live(process_store)["gemini"] == "closed"
    assert _live(process_store)["openai"] == "open"

    every = manage_client.post(f"{URL}reset/", {"all": True}, format="json")
    assert every.json() == {"ok": True, "resetCount": 3}
    assert set(_live(process_store).values()) == {"closed"}


def test_reset_refuses_an_unknown_name_or_no_choice(
    manage_client: APIClient, fail_provider: FailProvider, process_store: StateStore
) -> None:
    fail_provider("openai")

    unknown = manage_client.post(f"{URL}reset/", {"names": ["nope"]}, format="json")
    neither = manage_client.post(f"{URL}reset/", {}, format="json")

    assert unknown.status_code == 400 and "nope" in unknown.content.decode()
    assert neither.status_code == 400
    assert _live(process_store) == {"openai": "open"}


@pytest.mark.parametrize("lenient", ["yes", "on", 1, "1", "True"])
def test_reset_all_takes_only_a_json_boolean(
    manage_client: APIClient, fail_provider: FailProvider, process_store: StateStore, lenient: Any
) -> None:
    fail_provider("openai")

    response = manage_client.post(f"{URL}reset/", {"all": lenient}, format="json")

    assert response.status_code == 400 and "all" in response.json()["error"]["fields"]
    assert _live(process_store) == {"openai": "open"}


def test_reset_all_from_a_form_body_takes_the_word_true(
    manage_client: APIClient, fail_provider: FailProvider, process_store: StateStore
) -> None:
    fail_provider("openai")

    response = manage_client.post(f"{URL}reset/", {"all": "true"})

    assert response.json() == {"ok": True, "resetCount": 1}


def test_delete_forgets_one_breaker_record_and_row(
    manage_client: APIClient, fail_provider: FailProvider, process_store: StateStore
) -> None:
    fail_provider("openai")
    fail_provider("anthropic", times=7)

    response = manage_client.delete(f"{URL}openai/")

    assert response.status_code == 204
    assert _live(process_store) == {"anthropic": "degraded"}
    assert list(CircuitBreaker.objects.values_list("name", flat=True)) == ["anthropic"]
    assert manage_client.get(f"{URL}openai/").status_code == 404
