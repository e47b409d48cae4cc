"""Rate limits cost latency, not answers, through the chat
consumer.

A short upstream hint (a ``Retry-After`` within ``attempts.maxRetryAfterWaitMs``) is handled by
the request that got it; it locks the pair for everyone only on evidence of a real limit (two
hinted refusals in a row). A request that finds every target behind an upstream-hinted lock
waits for the earliest to end instead of being refused; when the lock ends one request probes
the pair and the others follow. The policy's waits run on the fake clock: nothing sleeps.
"""

from __future__ import annotations

import datetime as dt

import httpx
import pytest
from channels.db import database_sync_to_async

from resilience.domain.attribution import TimerClass
from resilience.domain.lockout import LockoutSettings, LockRequest
from resilience.services import resilience_settings_update
from resilience.services.lockout_operations import lockout_list
from resilience.services.lockouts import pair_record_hinted
from routing.domain.config.snapshot import ConfigSnapshot
from routing.domain.plan.planning import RoutePlan, Target
from routing.models import Provider
from routing.proxy.context import AttemptContext
from routing.proxy.guards.lockout import ModelLockoutFilter
from routing.snapshot import current_snapshot
from tests.routing.harness import (
    BACKUP,
    OK,
    PRIMARY,
    Behaviour,
    Gateway,
    add_connection,
    add_provider,
    error,
    in_turn,
)
from tests.routing.test_consumer_availability import add_combo

pytestmark = pytest.mark.django_db(transaction=True)

LIMITED = error(429, "slow down", headers={"retry-after": "2"})
LONG = error(429, "slow down", headers={"retry-after": "30"})


def context_for(target: Target, config: ConfigSnapshot) -> AttemptContext:
    key = next(iter(config.keys_by_hash.values()))
    plan = RoutePlan("acme/a", "single", (target,))
    return AttemptContext.start("request", key, plan, stream=False, snapshot=config)


def counted(calls: list[float], gateway: Gateway, then: Behaviour) -> Behaviour:
    """``then``, noting the fake clock's time of each call in ``calls``."""

    async def behaviour(request: httpx.Request) -> httpx.Response:
        calls.append(gateway.clock.now)
        return await then(request)

    return behaviour


async def refused_twice(gateway: Gateway, connection_id: int, model: str = "a") -> None:
    """Two hinted refusals in a row on the pair, as two requests would record them."""
    for _ in range(2):
        await pair_record_hinted(
            store=gateway.store,
            provider="acme",
            connection_id=connection_id,
            model=model,
            request=LockRequest("rate_limit_exceeded", 2_000, True, timer=TimerClass.HINTED),
            settings=LockoutSettings(),
            tz=dt.UTC,
            short=True,
        )


async def test_one_short_hint_locks_nothing_for_other_requests(
    gateway: Gateway, primary: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = in_turn(LIMITED, OK, OK)

    first = await gateway.call("acme/a")  # waits its own 2 s out and retries
    assert first.status == 200
    assert await lockout_list(store=gateway.store) == []

    second = await gateway.call("acme/a")

    assert second.status == 200
    assert gateway.fake.calls == [PRIMARY] * 3


async def test_two_hinted_refusals_in_a_row_lock_the_pair_for_exactly_the_hint(
    gateway: Gateway, primary: int
) -> None:
    await refused_twice(gateway, primary)

    [lock] = await lockout_list(store=gateway.store)

    assert (lock.model, lock.timer) == ("a", TimerClass.HINTED)
    assert lock.remaining_ms == 2_000


async def test_a_success_in_between_is_no_evidence(gateway: Gateway, primary: int) -> None:
    gateway.fake.behaviours[PRIMARY] = in_turn(LIMITED, OK, LIMITED, OK)

    for _ in range(2):
        assert (await gateway.call("acme/a")).status == 200

    assert await lockout_list(store=gateway.store) == []


async def test_a_long_hint_locks_at_once(gateway: Gateway, primary: int, backup: int) -> None:
    gateway.fake.behaviours.update({PRIMARY: LONG, BACKUP: OK})

    assert (await gateway.call("acme/a")).connection == backup

    [lock] = await lockout_list(store=gateway.store)
    assert lock.connection_id == primary


async def test_a_request_that_finds_the_pair_locked_waits_instead_of_being_refused(
    gateway: Gateway, primary: int
) -> None:
    await refused_twice(gateway, primary)
    calls: list[float] = []
    gateway.fake.behaviours[PRIMARY] = counted(calls, gateway, OK)
    started = gateway.clock.now

    reply = await gateway.call("acme/a")

    assert reply.status == 200
    assert len(calls) == 1 and calls[0] - started >= 2  # the lock was waited out, then probed
    assert await lockout_list(store=gateway.store) == []


async def test_a_probe_refused_again_is_waited_for_again(gateway: Gateway, primary: int) -> None:
    await refused_twice(gateway, primary)
    calls: list[float] = []
    gateway.fake.behaviours[PRIMARY] = counted(calls, gateway, in_turn(LIMITED, LIMITED, OK))
    started = gateway.clock.now

    reply = await gateway.call("acme/a")

    assert reply.status == 200
    # one attempt per hint period: each probe's refusal relocks the pair for its 2 s
    assert [round(t - started) for t in calls] == [2, 4, 6]


async def test_a_hint_longer_than_the_wait_cap_is_refused_at_once(
    gateway: Gateway, primary: int
) -> None:
    await database_sync_to_async(resilience_settings_update)(
        patch={"attempts": {"maxRetryAfterWaitMs": 1_000}}
    )
    await refused_twice(gateway, primary)  # 2 s locks: longer than the 1 s a request waits
    calls: list[float] = []
    gateway.fake.behaviours[PRIMARY] = counted(calls, gateway, OK)

    reply = await gateway.call("acme/a")

    assert (reply.status, reply.json()["error"]["code"]) == (503, "all_targets_cooling_down")
    assert reply.headers["retry-after"] == "2"
    assert calls == []


async def test_a_combo_waits_for_its_earliest_hinted_target(
    gateway: Gateway, acme: Provider, primary: int
) -> None:
    await database_sync_to_async(add_combo)("duo", acme, "a", "b")
    await refused_twice(gateway, primary, "a")
    await refused_twice(gateway, primary, "b")
    calls: list[float] = []
    gateway.fake.behaviours[PRIMARY] = counted(calls, gateway, OK)

    reply = await gateway.call("duo")

    assert reply.status == 200 and len(calls) == 1


async def test_a_probe_is_claimed_once_and_the_others_poll_until_it_answers(
    gateway: Gateway, primary: int
) -> None:
    await refused_twice(gateway, primary)
    gateway.clock.advance(2.5)  # the lock has ended: its probe is out
    guard = ModelLockoutFilter(gateway.store)
    config = await current_snapshot()
    [connection] = config.connections_for("acme")
    target = Target(config.providers["acme"], connection, "a")
    prober, follower = context_for(target, config), context_for(target, config)

    assert await guard.exclude(target, prober) is None  # the probe
    polled = await guard.exclude(target, follower)
    assert polled is not None and polled.polling and polled.retry_after_seconds == 0.1

    released = prober.on_finish[0]()  # the probe ended with no answer: its claim goes back
    assert released is not None
    await released
    assert await guard.exclude(target, follower) is None


# --- a provider whose quota is account-wide -------------------------------------------------


@pytest.fixture
def account_wide(db: None) -> int:
    """A connection of a provider whose 429s are the whole account's (``per_model_quota``
    false), with the key ``PRIMARY``."""
    provider = add_provider("whole", per_model_quota=False)
    return add_connection(provider, "only", PRIMARY, priority=10)


async def test_one_short_hint_does_not_cool_an_account_wide_connection(
    gateway: Gateway, account_wide: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = in_turn(LIMITED, OK)

    assert (await gateway.call("whole/a")).status == 200  # its own 2 s waited out

    assert await gateway.cooling_for(account_wide) == 0


async def test_two_hinted_refusals_in_a_row_cool_the_account_for_the_hint(
    gateway: Gateway, account_wide: int
) -> None:
    calls: list[float] = []
    gateway.fake.behaviours[PRIMARY] = counted(calls, gateway, in_turn(LIMITED, LIMITED, OK))

    reply = await gateway.call("whole/b")

    # the second refusal (any model) is evidence: cooled for its 2 s, which is waited out
    assert reply.status == 200
    assert len(calls) == 3
    assert calls[2] - calls[1] >= 2


async def test_a_success_between_two_hints_keeps_the_account_open(
    gateway: Gateway, account_wide: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = in_turn(LIMITED, OK, LIMITED, OK)

    for model in ("a", "b"):
        assert (await gateway.call(f"whole/{model}")).status == 200

    assert await gateway.cooling_for(account_wide) == 0
