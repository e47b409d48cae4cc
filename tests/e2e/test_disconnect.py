"""A client that leaves mid-stream cancels the upstream request at once."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, make_route, records

pytestmark = pytest.mark.e2e

CHUNK_INTERVAL_MS = 200


async def test_upstream_sees_the_close_within_one_chunk_interval(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, {"chunks": 40, "chunk_interval_ms": CHUNK_INTERVAL_MS})
    body = {"model": route.model(), "stream": True, "messages": [{"role": "user", "content": "x"}]}
    headers = {"authorization": f"Bearer {route.key}"}
    async with httpx.AsyncClient(base_url=f"{gateway.url}/v1", timeout=10) as client:
        async with client.stream("POST", "/chat/completions", json=body, headers=headers) as r:
            events = 0
            async for line in r.aiter_lines():
                events += line.startswith("data:")
                if events == 3:
                    break
        closed_at = time.monotonic()

    def noticed(upstream: FakeUpstream) -> bool:
        return records(upstream, route)[0].disconnected_at is not None

    # fake.requests hands out copies: read the record again once the fake noticed.
    assert await asyncio.to_thread(fake.wait_for, noticed, 3)
    (record,) = records(fake, route)
    assert record.disconnected_at is not None
    assert record.disconnected_at - closed_at < CHUNK_INTERVAL_MS / 1000
    assert record.chunks_sent < 10 and not record.completed
