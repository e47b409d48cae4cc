"""Driving and inspecting the fake upstream (no Django models, no DB): the ``/_fake/log``,
``/_fake/reset`` and ``/_fake/script`` endpoints, the request log as snapshots or off, and a
``stop`` that does not hang on a stalled request.
"""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.tools.fakeupstream.support import post, sse_data

# ------------------------------------------------------------------------------ control


async def test_log_and_reset_endpoints(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    await post(client, fake, "header", {"chunks": 2}, stream=True, messages=[{"role": "user"}])
    log = (await client.get(fake.url + "/_fake/log")).json()
    (entry,) = log
    assert entry["method"] == "POST" and entry["path"] == "/v1/chat/completions"
    assert entry["headers"]["x-fake-chunks"] == "2"
    assert entry["body"]["messages"] == [{"role": "user"}]
    assert entry["behaviour"]["chunks"] == 2 and entry["completed"] is True
    fake.script({"status": 500})
    assert (await client.post(fake.url + "/_fake/reset")).json() == {"reset": True}
    assert fake.requests == []
    assert (await post(client, fake)).status_code == 200  # the script was cleared too


async def test_script_endpoint(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    script = [{"status": 503, "retry_after": 1}, {"chunks": 1}]
    resp = await client.post(fake.url + "/_fake/script", json=script)
    assert resp.json() == {"queued": 2}
    first = await post(client, fake)
    assert first.status_code == 503 and first.headers["retry-after"] == "1"
    assert len(sse_data((await post(client, fake, stream=True)).text)) == 3
    bad = await client.post(fake.url + "/_fake/script", json=[{"nope": 1}])
    assert bad.status_code == 400


async def test_requests_are_snapshots(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    await post(client, fake)
    snapshot = fake.requests
    snapshot[0].completed = False
    assert fake.requests[0].completed


async def test_no_record_keeps_no_log(client: httpx.AsyncClient) -> None:
    with FakeUpstream(record=False).start() as fake:
        assert (await post(client, fake, stream=True)).status_code == 200
        assert fake.requests == []
        assert not fake.wait_for(lambda f: f.requests, timeout=0.05)


async def test_stop_does_not_hang_on_stalled_request() -> None:
    fake = FakeUpstream().start()
    done = threading.Event()

    async def stalled() -> None:
        async with httpx.AsyncClient(timeout=5.0) as client:
            with pytest.raises(httpx.TransportError):
                await post(client, fake, "header", {"stall": "before"})
        done.set()

    task = asyncio.create_task(stalled())
    assert await fake.wait_for_async(lambda f: f.requests, timeout=1.0)
    started = time.monotonic()
    await asyncio.to_thread(fake.stop)
    assert time.monotonic() - started < 2.0
    await asyncio.wait_for(task, 2.0)
    assert done.is_set()


async def test_each_recorded_request_keeps_its_messages_and_prefill(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    asked = [{"role": "user", "content": "hi"}]
    continued = [*asked, {"role": "assistant", "content": "The qu"}]
    await post(client, fake, messages=asked)
    await post(client, fake, stream=True, messages=continued)
    first, second = fake.requests
    assert (first.messages, first.prefill) == (asked, None)
    assert (second.messages, second.prefill) == (continued, "The qu")
    log = (await client.get(fake.url + "/_fake/log")).json()
    assert [e["body"]["messages"] for e in log] == [asked, continued]
    assert [e["prefill"] for e in log] == [None, "The qu"]


# ------------------------------------------------------------------------------ connections


async def test_connections_count_distinct_client_connections(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    for _ in range(3):
        await post(client, fake)  # one pooled connection, reused
    assert fake.stats["connections"] == 1
    async with httpx.AsyncClient(timeout=5.0) as other:
        await post(other, fake)
    assert fake.stats == {"chat": 4, "failed": 0, "connections": 2}
    fake.reset()
    assert fake.stats["connections"] == 0


async def test_a_reset_connection_is_not_reused(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    await post(client, fake)
    with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
        await post(client, fake, "header", {"reset": "mid", "mid_at": 1}, stream=True)
    await post(client, fake)
    assert fake.stats["connections"] == 2  # the reset one, then a fresh one


async def test_connections_are_counted_without_a_log(client: httpx.AsyncClient) -> None:
    with FakeUpstream(record=False).start() as fake:
        await post(client, fake)
        await post(client, fake)
        assert fake.stats == {"chat": 2, "failed": 0, "connections": 1}
