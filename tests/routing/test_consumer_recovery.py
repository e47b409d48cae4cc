"""Recovery follows the upstream, through the chat consumer: a self-set
pair lock starts at ``availability.transientCooldownBaseMs``, doubles with each failed probe
(a panic attempt included) up to ``transientCooldownCapMs``, and a success starts the next
one from the base again, so a target serves again about the outage's own length after it
heals. ``httpx.MockTransport`` plays the upstream and the store runs on a fake clock.
"""

from __future__ import annotations

import httpx
import pytest
from channels.db import database_sync_to_async

from resilience.services import resilience_settings_update
from resilience.services.lockout_operations import lockout_list
from tests.routing.harness import BACKUP, OK, PRIMARY, UNAVAILABLE, Behaviour, Gateway
from tests.routing.test_consumer_availability import BASE_SECONDS, CAP_SECONDS, lock_remaining

pytestmark = pytest.mark.django_db(transaction=True)

STEP_SECONDS = 0.5  # the clients ask for the model every half second


def down_until(gateway: Gateway, healed_at: float) -> Behaviour:
    """An upstream that answers 503 until the fake clock reaches ``healed_at``, then serves."""

    async def behaviour(request: httpx.Request) -> httpx.Response:
        return await (UNAVAILABLE if gateway.clock.now < healed_at else OK)(request)

    return behaviour


async def ride_out(
    gateway: Gateway, primary: int, seconds: float
) -> tuple[float | None, list[float]]:
    """Ask for ``acme/a`` every ``STEP_SECONDS`` for at most ``seconds``, until the primary
    serves it. Returns when it did (``None``: never), and the length of each lock the pair got,
    in order."""
    lengths: dict[float, float] = {}
    end = gateway.clock.now + seconds
    while gateway.clock.now < end:
        reply = await gateway.call("acme/a")
        for view in await lockout_list(store=gateway.store):
            lengths[view.locked_at] = view.until - view.locked_at
        if reply.connection == primary:
            return gateway.clock.now, list(lengths.values())
        gateway.clock.advance(STEP_SECONDS)
    return None, list(lengths.values())


@pytest.mark.parametrize(
    ("outage", "back_within", "locks"),
    [
        (6, 8, [2, 4]),  # noticed at the second probe, not a fixed 30 s later
        (60, 35, [2, 4, 8, 16, 30]),  # the doubling stops at the cap
    ],
)
async def test_a_flapping_target_serves_again_soon_after_it_heals(
    gateway: Gateway,
    primary: int,
    backup: int,
    outage: float,
    back_within: float,
    locks: list[float],
) -> None:
    healed_at = gateway.clock.now + outage
    gateway.fake.behaviours.update({PRIMARY: down_until(gateway, healed_at), BACKUP: OK})

    served_at, lengths = await ride_out(gateway, primary, outage + 60)

    assert served_at is not None and served_at - healed_at <= back_within
    assert lengths == locks
    assert await lockout_list(store=gateway.store) == []  # the probe's success cleared it


async def test_without_a_success_the_lock_doubles_up_to_the_cap_and_stays_there(
    gateway: Gateway, primary: int, backup: int
) -> None:
    gateway.fake.behaviours.update({PRIMARY: UNAVAILABLE, BACKUP: OK})

    served_at, lengths = await ride_out(gateway, primary, 300)

    assert served_at is None
    assert lengths[:5] == [2, 4, 8, 16, CAP_SECONDS]
    assert len(lengths) > 6 and set(lengths[4:]) == {CAP_SECONDS}


async def test_a_success_starts_the_next_lock_from_the_base_again(
    gateway: Gateway, primary: int, backup: int
) -> None:
    gateway.fake.behaviours.update({PRIMARY: UNAVAILABLE, BACKUP: OK})
    for _ in range(3):
        await gateway.call("acme/a")
    for length in (BASE_SECONDS, 2 * BASE_SECONDS):  # two failed probes: 8 s now
        gateway.clock.advance(length)
        await gateway.call("acme/a")
    assert await lock_remaining(gateway, primary, "a") == 4 * BASE_SECONDS
    gateway.clock.advance(4 * BASE_SECONDS)
    gateway.fake.behaviours[PRIMARY] = OK
    assert (await gateway.call("acme/a")).connection == primary  # the probe succeeds

    gateway.fake.behaviours[PRIMARY] = UNAVAILABLE  # and the next outage begins
    for _ in range(3):
        assert (await gateway.call("acme/a")).connection == backup

    assert await lock_remaining(gateway, primary, "a") == BASE_SECONDS


async def test_a_failed_panic_attempt_is_a_failed_probe(gateway: Gateway, primary: int) -> None:
    gateway.fake.behaviours[PRIMARY] = UNAVAILABLE
    await gateway.call("acme/a")
    await gateway.call("acme/a")  # three failures in a row: locked for the base
    assert await lock_remaining(gateway, primary, "a") == BASE_SECONDS
    gateway.clock.advance(BASE_SECONDS / 2)

    reply = await gateway.call("acme/a")  # only a self-set lock excludes it: the panic attempt

    assert reply.status == 503 and reply.decision()["panic"] == "1"
    assert await lock_remaining(gateway, primary, "a") == 2 * BASE_SECONDS


async def test_a_higher_base_setting_lengthens_the_first_lock(
    gateway: Gateway, primary: int
) -> None:
    await database_sync_to_async(resilience_settings_update)(
        patch={"availability": {"transientCooldownBaseMs": 5_000}}
    )
    gateway.fake.behaviours[PRIMARY] = UNAVAILABLE
    await gateway.call("acme/a")
    await gateway.call("acme/a")

    assert await lock_remaining(gateway, primary, "a") == 5
