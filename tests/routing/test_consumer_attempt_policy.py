"""The attempt policy through the chat consumer: retries with backoff, short ``Retry-After``
waits, the request deadline.

The policy's waits and the deadline run on the fake clock (``policy_clock``): a wait advances
it, nothing sleeps.
"""

from __future__ import annotations

import httpx
import pytest
from channels.db import database_sync_to_async

from resilience.services import resilience_settings_update
from tests.routing.harness import (
    BACKUP,
    OK,
    PRIMARY,
    UNAVAILABLE,
    Behaviour,
    Gateway,
    chat,
    communicator,
    error,
    read_reply,
    send_body,
)

pytestmark = pytest.mark.django_db(transaction=True)


def in_turn(*behaviours: Behaviour) -> Behaviour:
    answers = iter(behaviours)

    async def behaviour(request: httpx.Request) -> httpx.Response:
        return await next(answers)(request)

    return behaviour


def timed(gateway: Gateway, seen: list[float], then: Behaviour) -> Behaviour:
    async def behaviour(request: httpx.Request) -> httpx.Response:
        seen.append(gateway.clock.now)
        return await then(request)

    return behaviour


async def test_a_short_retry_after_is_waited_out_on_the_only_connection(
    gateway: Gateway, primary: int
) -> None:
    seen: list[float] = []
    limited = error(429, "slow down", headers={"retry-after": "2"})
    gateway.fake.behaviours.update({PRIMARY: timed(gateway, seen, in_turn(limited, OK))})

    reply = await gateway.call("acme/a")

    assert reply.connection == primary and reply.status == 200
    assert gateway.fake.calls == [PRIMARY, PRIMARY]
    assert seen[1] - seen[0] >= 2


async def test_a_short_retry_after_fails_over_at_once_to_the_same_model_elsewhere(
    gateway: Gateway, primary: int, backup: int
) -> None:
    limited = error(429, "slow down", headers={"retry-after": "2"})
    gateway.fake.behaviours.update({PRIMARY: in_turn(limited, OK), BACKUP: OK})
    started = gateway.clock.now

    reply = await gateway.call("acme/a")

    # another account serving the same model answers now: no wait
    assert reply.connection == backup and reply.status == 200
    assert gateway.fake.calls == [PRIMARY, BACKUP]
    assert gateway.clock.now == started


async def test_a_long_retry_after_fails_over_at_once(
    gateway: Gateway, primary: int, backup: int
) -> None:
    limited = error(429, "slow down", headers={"retry-after": "30"})
    gateway.fake.behaviours.update({PRIMARY: limited, BACKUP: OK})

    reply = await gateway.call("acme/a")

    assert reply.connection == backup
    assert gateway.fake.calls == [PRIMARY, BACKUP]


async def test_a_429_without_a_hint_is_tried_twice_then_the_next_target_answers(
    gateway: Gateway, primary: int, backup: int
) -> None:
    gateway.fake.behaviours.update({PRIMARY: error(429, "slow down"), BACKUP: OK})

    reply = await gateway.call("acme/a")

    assert reply.connection == backup
    assert gateway.fake.calls == [PRIMARY, PRIMARY, BACKUP]


async def test_retries_per_target_zero_fails_over_at_once(
    gateway: Gateway, primary: int, backup: int
) -> None:
    await database_sync_to_async(resilience_settings_update)(
        patch={"attempts": {"retriesPerTarget": 0}}
    )
    gateway.fake.behaviours.update({PRIMARY: UNAVAILABLE, BACKUP: OK})

    assert (await gateway.call("acme/a")).connection == backup
    assert gateway.fake.calls == [PRIMARY, BACKUP]


async def test_a_spent_deadline_answers_504_with_what_was_tried(
    gateway: Gateway, primary: int, backup: int
) -> None:
    async def slow_503(request: httpx.Request) -> httpx.Response:
        gateway.clock.advance(2)  # the upstream took 2 s to say no
        return await UNAVAILABLE(request)

    gateway.fake.behaviours.update({PRIMARY: slow_503, BACKUP: OK})
    comm = communicator(
        gateway.app, gateway.key, extra_headers=[(b"x-omniroute-deadline-ms", b"1500")]
    )
    await send_body(comm, chat("acme/a"))

    reply = await read_reply(comm)

    assert reply.status == 504
    error_ = reply.json()["error"]
    assert error_["code"] == "request_deadline_exceeded"
    assert f"acme/a@{primary}: 503" in error_["message"]
    assert gateway.fake.calls == [PRIMARY]  # no time was left for the backup


@pytest.mark.parametrize("value", [b"soon", b"0", b"-5"])
async def test_a_malformed_deadline_header_is_a_400(
    gateway: Gateway, primary: int, value: bytes
) -> None:
    gateway.fake.behaviours[PRIMARY] = OK
    comm = communicator(
        gateway.app, gateway.key, extra_headers=[(b"x-omniroute-deadline-ms", value)]
    )
    await send_body(comm, chat("acme/a"))

    reply = await read_reply(comm)

    assert (reply.status, reply.json()["error"]["code"]) == (400, "invalid_deadline")
    assert gateway.fake.calls == []
