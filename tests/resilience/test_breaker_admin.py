"""The breaker admin: a read-only list of persisted breakers, and the reset action."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
import time_machine
from asgiref.sync import async_to_sync
from django.contrib import messages
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from omniroute.core.store import StateStore
from resilience.models import CircuitBreaker
from resilience.services.breakers import breaker_list
from tests.resilience.conftest import FailProvider

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:resilience_circuitbreaker_changelist")


@pytest.fixture
def frozen() -> Iterator[time_machine.Traveller]:
    """Wall-clock time stands still (the admin computes retry-after from ``time.time``)."""
    start = dt.datetime(2025, 1, 6, 12, tzinfo=dt.UTC)
    with time_machine.travel(start, tick=False) as traveller:
        yield traveller


def _messages(response: Any) -> list[tuple[int, str]]:
    return [(m.level, str(m)) for m in get_messages(response.wsgi_request)]


def test_changelist_shows_state_with_retry_after_and_the_change_page_transitions(
    staff_client: Client, fail_provider: FailProvider, frozen: time_machine.Traveller
) -> None:
    fail_provider("openai")
    fail_provider("anthropic", times=7)
    frozen.shift(12)

    response = staff_client.get(CHANGELIST)

    assert response.status_code == 200
    page = response.content.decode()
    assert '<span class="state-badge state-badge--bad">open 18 s</span>' in page  # 30 s - 12 s
    assert '<span class="state-badge state-badge--warn">degraded</span>' in page
    opened = staff_client.get(reverse("admin:resilience_circuitbreaker_change", args=["openai"]))
    transitions = "<div>degraded → open (threshold)</div><div>closed → degraded (degraded)</div>"
    assert transitions in opened.content.decode()  # on the breaker's own page
    assert "→" not in page


def test_reset_action_closes_the_selected_breakers(
    staff_client: Client, fail_provider: FailProvider, process_store: StateStore
) -> None:
    fail_provider("openai")
    fail_provider("anthropic", times=7)

    response = staff_client.post(
        CHANGELIST, {"action": "reset_breakers", "_selected_action": ["openai"]}, follow=True
    )

    assert response.status_code == 200
    assert _messages(response) == [(messages.SUCCESS, "Reset 1 breaker(s).")]
    breakers = async_to_sync(breaker_list)(store=process_store)
    assert {name: b.state.value for name, b in breakers.items()} == {
        "openai": "closed",
        "anthropic": "degraded",
    }
    assert dict(CircuitBreaker.objects.values_list("name", "state")) == {
        "openai": "closed",
        "anthropic": "degraded",
    }
    assert '<span class="state-badge state-badge--ok">closed</span>' in response.content.decode()


def test_breakers_cannot_be_added_or_edited(
    staff_client: Client, fail_provider: FailProvider
) -> None:
    fail_provider("openai")
    change = reverse("admin:resilience_circuitbreaker_change", args=["openai"])

    assert staff_client.get(reverse("admin:resilience_circuitbreaker_add")).status_code == 403
    assert staff_client.post(change, {"state": "closed"}).status_code == 403
    view = staff_client.get(change)  # a read-only page
    assert view.status_code == 200
    assert 'name="_save"' not in view.content.decode()
    assert CircuitBreaker.objects.get(name="openai").state == "open"


def test_breaker_times_show_seconds(staff_client: Client) -> None:
    at = dt.datetime(2026, 1, 31, 14, 5, 9, tzinfo=dt.UTC)
    CircuitBreaker.objects.create(name="mock", last_failure_time=at)
    CircuitBreaker.objects.filter(name="mock").update(updated_at=at)  # auto_now on save only
    shown = f"{timezone.localtime(at):%Y-%m-%d %H:%M:%S}"

    listed = staff_client.get(CHANGELIST).content.decode()
    change = staff_client.get(reverse("admin:resilience_circuitbreaker_change", args=["mock"]))

    assert shown in listed
    assert shown in change.content.decode()
