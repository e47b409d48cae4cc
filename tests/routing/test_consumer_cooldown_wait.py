"""The cooldown-aware wait through the chat consumer:
a combo whose every target ended the pass behind a timer worth waiting for waits for the first
to end and tries again, instead of answering 429. The policy's waits run on the fake clock."""

from __future__ import annotations

import httpx
import pytest
from channels.db import database_sync_to_async

from resilience.services import resilience_settings_update
from routing.models import Combo, Provider
from routing.services import combo_save
from tests.routing.harness import OK, PRIMARY, Behaviour, FakeClock, Gateway, by_model, error

pytestmark = pytest.mark.django_db(transaction=True)

START = FakeClock().now


def once_then_ok(first: Behaviour) -> Behaviour:
    answers = iter([first])

    async def behaviour(request: httpx.Request) -> httpx.Response:
        return await next(answers, OK)(request)

    return behaviour


def limited(seconds: int) -> Behaviour:
    return error(429, "slow down", "rate_limit_exceeded", {"retry-after": str(seconds)})


@pytest.fixture
def duo(acme: Provider, primary: int) -> None:
    targets = [{"provider": acme, "model": "m1"}, {"provider": acme, "model": "m2"}]
    combo_save(combo=Combo(), fields={"name": "duo"}, targets=targets)


async def test_both_targets_limited_for_10_s_wait_and_then_answer(
    gateway: Gateway, duo: None
) -> None:
    gateway.fake.behaviours[PRIMARY] = by_model(
        m1=once_then_ok(limited(10)), m2=once_then_ok(limited(10))
    )

    reply = await gateway.call("duo")

    assert reply.status == 200
    assert gateway.fake.sent == [(PRIMARY, "m1"), (PRIMARY, "m2"), (PRIMARY, "m1")]
    assert 10 <= gateway.clock.now - START < 11  # one wait: the first timer's end, plus 50 ms


async def test_a_wait_longer_than_max_wait_is_not_waited(gateway: Gateway, duo: None) -> None:
    gateway.fake.behaviours[PRIMARY] = by_model(
        m1=once_then_ok(limited(200)), m2=once_then_ok(limited(200))
    )

    reply = await gateway.call("duo")

    assert reply.status == 429
    assert len(gateway.fake.sent) == 2
    assert gateway.clock.now == START


async def test_no_wait_when_switched_off(gateway: Gateway, duo: None) -> None:
    patch = {"comboCooldownWait": {"enabled": False}}
    await database_sync_to_async(resilience_settings_update)(patch=patch)
    gateway.fake.behaviours[PRIMARY] = by_model(
        m1=once_then_ok(limited(10)), m2=once_then_ok(limited(10))
    )

    reply = await gateway.call("duo")

    assert reply.status == 429 and len(gateway.fake.sent) == 2


async def test_a_target_without_a_timer_means_no_wait(gateway: Gateway, duo: None) -> None:
    gateway.fake.behaviours[PRIMARY] = by_model(
        m1=once_then_ok(limited(10)), m2=error(400, "temperature must be at most 2")
    )

    reply = await gateway.call("duo")

    assert reply.status == 400
    assert gateway.clock.now == START


async def test_at_most_max_attempts_waits(gateway: Gateway, duo: None) -> None:
    patch = {"comboCooldownWait": {"maxAttempts": 2}}
    await database_sync_to_async(resilience_settings_update)(patch=patch)
    gateway.fake.behaviours[PRIMARY] = limited(10)  # always

    reply = await gateway.call("duo")

    assert reply.status == 429
    assert len(gateway.fake.sent) == 6  # three passes over two targets, two waits between
