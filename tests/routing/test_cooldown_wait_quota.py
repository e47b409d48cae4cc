"""A quota exhaustion is never waited for (a quota goes to the next
target at once, as a longer hint does), even when its 429 carries a short
``Retry-After``: neither by the attempt policy on the same target nor by the combo's
cooldown-aware wait, whether the quota failure happens in this request or left a pair lock
that excludes the targets of the next one. An upstream-hinted rate limit still is waited for.

The waits run on the fake clock (``policy_clock``): a wait advances it, nothing sleeps.
"""

from __future__ import annotations

import httpx
import orjson
import pytest

from resilience.domain.attribution import TimerClass
from routing.models import Combo, Provider
from routing.proxy.cooldown_wait import wait_reason
from routing.services import combo_save
from tests.routing.harness import OK, PRIMARY, Behaviour, FakeClock, Gateway, answer, error

pytestmark = pytest.mark.django_db(transaction=True)

START = FakeClock().now
DAILY_QUOTA = "Daily quota exceeded for this model. Try again tomorrow."


def quota(retry_after: int) -> Behaviour:
    body = orjson.dumps({"error": {"message": DAILY_QUOTA, "type": "rate_limit_error"}})
    return answer(429, body, {"retry-after": str(retry_after)})


def limited(retry_after: int) -> Behaviour:
    return error(429, "slow down", "rate_limit_exceeded", {"retry-after": str(retry_after)})


def in_turn(*behaviours: Behaviour) -> Behaviour:
    """Each behaviour once, in order; then 200s."""
    answers = iter(behaviours)

    async def behaviour(request: httpx.Request) -> httpx.Response:
        return await next(answers, OK)(request)

    return behaviour


@pytest.fixture
def duo(acme: Provider, primary: int) -> None:
    targets = [{"provider": acme, "model": "m1"}, {"provider": acme, "model": "m2"}]
    combo_save(combo=Combo(), fields={"name": "duo"}, targets=targets)


@pytest.mark.parametrize(
    ("timer", "cause", "reason"),
    [
        (TimerClass.HINTED, "rate_limit_exceeded", "rate_limit"),
        (TimerClass.HINTED, "quota_exhausted", "quota_exhausted"),
        (TimerClass.QUOTA, "quota_exhausted", "quota_exhausted"),
        (TimerClass.QUOTA, "", "quota_exhausted"),
        (TimerClass.OPERATOR, "not_found", None),
        (TimerClass.SELF_SET, "server_error", None),
    ],
)
def test_the_reason_judged_is_the_failures_for_a_quota_else_the_timers(
    timer: TimerClass, cause: str, reason: str | None
) -> None:
    assert wait_reason(timer, cause) == reason


async def test_a_single_model_quota_429_with_a_short_hint_is_answered_at_once(
    gateway: Gateway, primary: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = in_turn(quota(2))

    reply = await gateway.call("acme/m1")

    assert reply.status == 429
    assert gateway.fake.calls == [PRIMARY]  # not retried after the 2 s hint
    assert gateway.clock.now == START


async def test_a_combo_whose_targets_answer_quota_429s_with_short_hints_does_not_wait(
    gateway: Gateway, duo: None
) -> None:
    gateway.fake.behaviours[PRIMARY] = in_turn(quota(2), quota(2))

    reply = await gateway.call("duo")

    assert reply.status == 429
    assert gateway.fake.sent == [(PRIMARY, "m1"), (PRIMARY, "m2")]
    assert gateway.clock.now == START


async def test_targets_locked_by_a_hinted_quota_429_are_not_waited_for(
    gateway: Gateway, duo: None
) -> None:
    gateway.fake.behaviours[PRIMARY] = in_turn(quota(10), quota(10))
    assert (await gateway.call("duo")).status == 429

    reply = await gateway.call("duo")  # both pairs locked for 10 s, by a quota answer

    assert (reply.status, reply.json()["error"]["code"]) == (503, "all_targets_cooling_down")
    assert len(gateway.fake.requests) == 2  # the second request reached no upstream
    assert gateway.clock.now == START


async def test_targets_locked_by_a_hinted_rate_limit_are_waited_for(
    gateway: Gateway, duo: None
) -> None:
    gateway.fake.behaviours[PRIMARY] = in_turn(limited(200), limited(200))
    assert (await gateway.call("duo")).status == 429  # 200 s: past comboCooldownWait.maxWaitMs
    gateway.clock.advance(195)

    reply = await gateway.call("duo")  # both pairs locked for 5 more seconds: worth waiting

    assert reply.status == 200
    assert gateway.fake.sent[2:] == [(PRIMARY, "m1")]
    assert 5 <= gateway.clock.now - START - 195 < 6
