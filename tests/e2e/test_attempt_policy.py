"""The attempt policy through real HTTP: a short Retry-After fails over at once to another
connection serving the model, or is waited out on the only one; a content-policy refusal is
returned as it is, and the request deadline bounds everything."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, make_route, records

pytestmark = pytest.mark.e2e

MESSAGES = [{"role": "user", "content": "x"}]


def ask(gateway: Gateway, key: str, model: str, **headers: str) -> httpx.Response:
    with gateway.client(key) as client:
        body: dict[str, Any] = {"model": model, "messages": MESSAGES}
        return client.post("/chat/completions", json=body, headers=headers)


def test_a_429_asking_for_two_seconds_is_waited_out_on_the_only_connection(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, {})
    fake.script({"status": 429, "retry_after": 2})

    response = ask(gateway, route.key, route.model())

    assert response.status_code == 200
    first, second = records(fake, route, 1)
    assert second.at - first.at >= 1.8


def test_a_429_asking_for_two_seconds_fails_over_at_once_to_another_connection(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, {}, {})
    fake.script({"status": 429, "retry_after": 2})

    response = ask(gateway, route.key, route.model())

    assert response.status_code == 200
    [refused], [answered] = records(fake, route, 1), records(fake, route, 2)
    assert answered.at - refused.at < 1  # an equivalent account answered now, no wait


def test_a_content_policy_refusal_is_returned_after_one_attempt(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    refusal = "Your request was rejected as a result of our content policy"
    route = make_route(gateway, fake, {"status": 400, "body": refusal}, {})

    response = ask(gateway, route.key, route.model())

    assert response.status_code == 400
    assert "content policy" in response.text
    assert (len(records(fake, route, 1)), len(records(fake, route, 2))) == (1, 0)


def test_silent_targets_and_a_two_second_deadline_answer_504_in_time(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    silent = {"stall": "before"}
    route = make_route(gateway, fake, silent, silent, silent)
    started = time.monotonic()

    response = ask(gateway, route.key, route.model(), **{"x-omniroute-deadline-ms": "2000"})

    elapsed = time.monotonic() - started
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "request_deadline_exceeded"
    assert elapsed < 3.0


def test_a_500_once_is_retried_on_the_same_target_which_answers(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, {}, {})
    fake.script({"status": 500})

    response = ask(gateway, route.key, route.model())

    assert response.status_code == 200
    assert len(records(fake, route, 1)) == 2
    assert records(fake, route, 2) == []
    assert f"connection={route.connections[0]}" in response.headers["x-omniroute-decision"]


def test_a_429_without_a_hint_every_time_is_tried_twice_then_the_next_target_answers(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, {"status": 429}, {})
    started = time.monotonic()

    response = ask(gateway, route.key, route.model())

    assert response.status_code == 200
    first = records(fake, route, 1)
    assert len(first) <= 2
    assert first[-1].at - started < 3.0
    assert len(records(fake, route, 2)) == 1
