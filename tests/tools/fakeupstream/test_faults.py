"""Faults the fake upstream injects (no Django models, no DB): connection resets before and
mid-response, stalls that hit client timeouts, cut streams, and client disconnects it records.
"""

from __future__ import annotations

import asyncio
import logging
import time

import httpx
import pytest
from httpx_aiohttp import AiohttpTransport

from omniroute.tools.fakeupstream import FakeUpstream
from tests.tools.fakeupstream.support import deltas, last, post, request_parts, sse_data

# ------------------------------------------------------------------------------ faults


async def test_reset_before_is_a_transport_error(
    fake: FakeUpstream, client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="aiohttp"):
        with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
            await post(client, fake, "model", {"reset": "before"}, stream=True)
        assert (await post(client, fake)).status_code == 200  # the pool recovers
    rec = fake.requests[0]
    assert rec.aborted_at is not None and not rec.completed and rec.disconnected_at is None
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_reset_mid_raises_after_some_chunks(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    url, headers, body = request_parts(fake, "path", {"reset": "mid"}, {"stream": True})
    seen: list[str] = []
    with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
        async with client.stream("POST", url, json=body, headers=headers) as resp:
            async for line in resp.aiter_lines():
                seen += [line] if line.startswith("data:") else []
    assert len(seen) == 10  # read in one go at chunk interval 0, then the reset
    assert last(fake).chunks_sent == 10


async def test_reset_mid_of_json_body(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
        await post(client, fake, "script", {"reset": "mid"})


async def test_reset_surfaces_via_aiohttp_transport(fake: FakeUpstream) -> None:
    """httpx-aiohttp maps a reset before the response to httpx.ConnectTimeout (sic)."""
    async with httpx.AsyncClient(transport=AiohttpTransport(), timeout=5.0) as client:
        with pytest.raises(httpx.ConnectTimeout):
            await post(client, fake, "header", {"reset": "before"})
        with pytest.raises(httpx.ReadError):
            await post(client, fake, "header", {"reset": "mid"}, stream=True)


async def test_stall_before_hits_client_read_timeout(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    url, headers, body = request_parts(fake, "header", {"stall": "before"}, {})
    with pytest.raises(httpx.ReadTimeout):
        await client.post(url, json=body, headers=headers, timeout=0.3)
    assert await fake.wait_for_async(lambda f: f.requests[-1].disconnected_at, timeout=1.0)


async def test_stall_mid_times_out_after_half(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    url, headers, body = request_parts(
        fake, "model", {"stall": "mid", "chunks": 6}, {"stream": True}
    )
    seen: list[str] = []
    with pytest.raises(httpx.ReadTimeout):
        async with client.stream("POST", url, json=body, headers=headers, timeout=0.3) as resp:
            async for line in resp.aiter_lines():
                seen += [line] if line.startswith("data:") else []
    assert len(seen) == 3


async def test_cut_mid_ends_stream_without_done(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    resp = await post(client, fake, "script", {"cut": "mid"}, stream=True)
    events = sse_data(resp.text)
    assert resp.status_code == 200 and len(events) == 10 and "[DONE]" not in events
    assert all(d.get("content") for d in deltas(events))
    # The client can read the end of the stream before the fake's handler marks it done.
    await fake.wait_for_async(lambda f: last(f).completed, timeout=2)
    assert last(fake).completed


async def test_cut_mid_of_json_body(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    with pytest.raises(httpx.RemoteProtocolError):
        await post(client, fake, "header", {"cut": "mid"})


async def test_client_disconnect_is_recorded_promptly(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    url, headers, body = request_parts(fake, "header", {"chunk_interval_ms": 50}, {"stream": True})
    async with client.stream("POST", url, json=body, headers=headers) as resp:
        seen = 0
        async for line in resp.aiter_lines():
            seen += line.startswith("data:")
            if seen == 2:
                break
        closed_at = time.monotonic()  # leaving the block closes the connection
    got = await asyncio.to_thread(fake.wait_for, lambda f: f.requests[-1].disconnected_at, 1.0)
    rec = last(fake)
    assert got and rec.disconnected_at is not None
    assert rec.disconnected_at - closed_at < 0.2
    assert not rec.completed and rec.chunks_sent < 20
