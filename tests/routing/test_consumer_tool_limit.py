"""Dynamic tool limits through the chat consumer: a target that answered "too many tools
(max N)" is skipped, unasked, by later requests declaring more than N tools, and keeps
serving requests within its limit. The 400 itself charges no one and fails over."""

from __future__ import annotations

import orjson
import pytest

from resilience.services.lockout_operations import lockout_list
from tests.routing.harness import (
    BACKUP,
    OK,
    PRIMARY,
    Gateway,
    Reply,
    communicator,
    error,
    read_reply,
    send_body,
)

pytestmark = pytest.mark.django_db(transaction=True)

TOO_MANY = error(400, "too many tools: this model supports at most 128 tools (max 128), got 200")


def tools(count: int) -> list[dict[str, object]]:
    return [
        {"type": "function", "function": {"name": f"tool_{i}", "parameters": {}}}
        for i in range(count)
    ]


async def call_with_tools(gateway: Gateway, count: int) -> Reply:
    body = {"model": "acme/m1", "messages": [{"role": "user", "content": "hi"}]}
    if count:
        body["tools"] = tools(count)
    comm = communicator(gateway.app, gateway.key)
    await send_body(comm, orjson.dumps(body))
    return await read_reply(comm)


async def test_a_too_many_tools_400_fails_over_and_later_requests_skip_the_target(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    primary, _ = both
    gateway.fake.behaviours.update({PRIMARY: TOO_MANY, BACKUP: OK})

    first = await call_with_tools(gateway, 200)
    second = await call_with_tools(gateway, 200)

    assert (first.status, second.status) == (200, 200)
    assert gateway.fake.calls == [PRIMARY, BACKUP, BACKUP]  # the second never asked PRIMARY
    assert second.decision()["excluded"] == f"acme/m1@{primary}:tool_limit"
    assert await gateway.cooling_for(primary) == 0  # the 400 charged no one
    assert await lockout_list(store=gateway.store) == []


async def test_requests_within_the_learnt_limit_still_reach_the_target(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    gateway.fake.behaviours.update({PRIMARY: TOO_MANY, BACKUP: OK})
    await call_with_tools(gateway, 200)
    gateway.fake.behaviours[PRIMARY] = OK

    within = await call_with_tools(gateway, 128)
    none = await call_with_tools(gateway, 0)

    assert (within.status, none.status) == (200, 200)
    assert gateway.fake.calls == [PRIMARY, BACKUP, PRIMARY, PRIMARY]


async def test_the_learnt_limit_expires(gateway: Gateway, both: tuple[int, int]) -> None:
    gateway.fake.behaviours.update({PRIMARY: TOO_MANY, BACKUP: OK})
    await call_with_tools(gateway, 200)
    gateway.fake.behaviours[PRIMARY] = OK
    gateway.clock.advance(6 * 3600 + 1)

    reply = await call_with_tools(gateway, 200)

    assert reply.status == 200
    assert gateway.fake.calls == [PRIMARY, BACKUP, PRIMARY]


async def test_the_only_target_returns_its_400_and_then_is_refused_without_a_call(
    gateway: Gateway, primary: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = TOO_MANY

    first = await call_with_tools(gateway, 200)
    second = await call_with_tools(gateway, 200)

    assert first.status == 400
    assert "max 128" in first.json()["error"]["message"]
    assert gateway.fake.calls == [PRIMARY]  # neither retried nor asked again
    assert second.status == 404
    assert second.json()["error"]["code"] == "no_executable_targets"
    assert second.json()["diagnostics"]["excluded"][0]["reason"] == "tool_limit"
