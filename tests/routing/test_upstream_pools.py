"""The upstream connection pools close on request (``Upstream.aclose``, the gateway's stop).

Against the fake upstream over real sockets: a request opens a provider's pool (an aiohttp
session); ``aclose`` closes it, and a later request opens a fresh one.
"""

from __future__ import annotations

from collections.abc import Iterator

import aiohttp
import orjson
import pytest
from httpx_aiohttp import AiohttpTransport

from omniroute.tools.fakeupstream import FakeUpstream
from routing.domain.attempts.outcomes import OutcomeKind
from routing.domain.config.snapshot import ConnectionInfo, ProviderInfo
from routing.domain.plan.planning import Target
from routing.proxy.upstream.client import Upstream

PAYLOAD = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]})


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstream]:
    with FakeUpstream().start() as upstream:
        yield upstream


def target_at(base_url: str) -> Target:
    provider = ProviderInfo("acme", "Acme", "api_key", base_url, "openai")
    connection = ConnectionInfo(1, "acme", "only", 10, base_url, "api_key", "sk-test")
    return Target(provider, connection, "m")


def session_of(upstream: Upstream) -> aiohttp.ClientSession:
    transport = upstream.transport("acme")
    assert isinstance(transport, AiohttpTransport)
    assert isinstance(transport.client, aiohttp.ClientSession)
    return transport.client


async def asked(upstream: Upstream, target: Target) -> OutcomeKind:
    outcome, reply = await upstream.send(target, PAYLOAD, stream=False)
    if reply is not None:
        await reply.aclose()
    return outcome.kind


async def test_aclose_closes_the_pools_and_a_later_request_opens_a_new_one(
    fake: FakeUpstream,
) -> None:
    upstream, target = Upstream(), target_at(fake.base_url())
    assert await asked(upstream, target) is OutcomeKind.SUCCESS
    first = session_of(upstream)

    await upstream.aclose()

    assert first.closed
    assert await asked(upstream, target) is OutcomeKind.SUCCESS
    second = session_of(upstream)
    assert second is not first and not second.closed
    await upstream.aclose()
    assert second.closed
