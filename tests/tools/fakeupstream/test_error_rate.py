"""The fake upstream's ``error_rate`` knob, its per-model knobs and its answer counters (no
Django models, no DB): failures drawn from a seeded generator, repeatable per seed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from unittest.mock import ANY

import aiohttp
import httpx
import pytest

from omniroute.tools.fakeupstream import Behaviour, FakeUpstream, model_with
from tests.tools.fakeupstream.support import CHANNELS, deltas, post, request_parts, sse_data

SEED = 20260101


@pytest.fixture
def seeded() -> Iterator[FakeUpstream]:
    """A fake upstream of its own with a fixed seed and no request log (counters only)."""
    with FakeUpstream(seed=SEED, record=False).start() as fake:
        yield fake


async def statuses(url: str, count: int, parallel: int = 16) -> list[int]:
    """The statuses of ``count`` chat requests to ``url``, ``parallel`` at a time (aiohttp:
    several times faster than httpx here, which keeps the thousand-request test short)."""
    gate = asyncio.Semaphore(parallel)
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(timeout=timeout) as session:

        async def one() -> int:
            async with gate, session.post(url, json={"model": "gpt-4o"}) as resp:
                await resp.read()
                return resp.status

        return list(await asyncio.gather(*(one() for _ in range(count))))


async def test_five_percent_of_a_thousand_fail(seeded: FakeUpstream) -> None:
    url = seeded.base_url(status=503, error_rate=0.05) + "/chat/completions"
    got = await statuses(url, 1000)
    failed = got.count(503)
    assert set(got) <= {200, 503}
    assert 20 <= failed <= 80
    assert seeded.stats == {"chat": 1000, "failed": failed, "connections": ANY}


async def test_a_random_429_carries_its_retry_after(seeded: FakeUpstream) -> None:
    # The hinted case of ``make availability``: 4 % of calls answer 429 with Retry-After: 1.
    url = seeded.base_url(status=429, retry_after=1, error_rate=0.04) + "/chat/completions"
    gate = asyncio.Semaphore(16)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:

        async def one() -> tuple[int, str | None]:
            async with gate, session.post(url, json={"model": "gpt-4o"}) as resp:
                await resp.read()
                return resp.status, resp.headers.get("retry-after")

        got = await asyncio.gather(*(one() for _ in range(1000)))
    limited = [hint for status, hint in got if status == 429]
    assert set(got) <= {(200, None), (429, "1")}
    assert 10 <= len(limited) <= 75  # 40 expected, within 5 standard deviations
    assert seeded.stats == {"chat": 1000, "failed": len(limited), "connections": ANY}


@pytest.mark.parametrize(("rate", "expected"), [("0", {200}), ("1", {503}), ("1.0", {503})])
async def test_rate_zero_never_fails_and_one_always_does(
    seeded: FakeUpstream, rate: str, expected: set[int]
) -> None:
    url = seeded.base_url(status=503, error_rate=rate) + "/chat/completions"
    assert set(await statuses(url, 100)) == expected


async def test_without_error_rate_the_failure_always_applies(seeded: FakeUpstream) -> None:
    url = seeded.base_url(status=503) + "/chat/completions"
    assert set(await statuses(url, 50)) == {503}
    assert seeded.stats == {"chat": 50, "failed": 50, "connections": ANY}


async def test_the_same_seed_gives_the_same_sequence() -> None:
    runs = []
    for _ in range(2):
        with FakeUpstream(seed=SEED, record=False).start() as fake:
            url = fake.base_url(status=500, error_rate=0.3) + "/chat/completions"
            runs.append(await statuses(url, 60, parallel=1))
    assert runs[0] == runs[1]
    assert 0 < runs[0].count(500) < 60


@pytest.mark.parametrize("channel", CHANNELS)
async def test_error_rate_via_each_channel(
    fake: FakeUpstream, client: httpx.AsyncClient, channel: str
) -> None:
    for rate, status in (("1", 502), ("0", 200)):
        resp = await post(client, fake, channel, {"status": 502, "error_rate": rate})
        assert resp.status_code == status


async def test_a_passing_draw_keeps_the_shape_and_drops_the_failure(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    knobs = {"status": 429, "retry_after": 3, "chunks": 3, "error_rate": 0}
    resp = await post(client, fake, "path", knobs, stream=True)
    assert resp.status_code == 200 and "retry-after" not in resp.headers
    assert len(deltas(sse_data(resp.text))) == 4  # 3 content chunks and the finish chunk
    assert fake.requests[-1].behaviour == Behaviour(chunks=3, error_rate=0.0)


async def test_a_reset_applies_only_when_drawn(
    seeded: FakeUpstream, client: httpx.AsyncClient
) -> None:
    url = seeded.base_url(reset="before", error_rate=0.5) + "/chat/completions"
    outcomes = []
    for _ in range(40):
        try:
            outcomes.append((await client.post(url, json={"model": "m"})).status_code)
        except httpx.TransportError:
            outcomes.append(0)
    assert set(outcomes) == {0, 200}
    assert seeded.stats == {"chat": 40, "failed": outcomes.count(0), "connections": ANY}


@pytest.mark.parametrize("rate", ["1.5", "-0.1", "nan", "often"])
async def test_bad_error_rate_is_400(
    fake: FakeUpstream, client: httpx.AsyncClient, rate: str
) -> None:
    resp = await post(client, fake, "model", {"status": 503, "error_rate": rate})
    assert resp.status_code == 400
    assert resp.json()["error"]["type"] == "fake_knob_error"


def test_behaviour_error_rate_validation() -> None:
    assert Behaviour().error_rate is None
    assert Behaviour().with_knobs({"error_rate": "none"}).error_rate is None
    assert Behaviour(status=503, error_rate=0.2).healthy() == Behaviour(error_rate=0.2)
    with pytest.raises(ValueError, match="error_rate"):
        Behaviour(error_rate=2)


# ------------------------------------------------------------------- per-model knobs, stats


async def test_per_model_knobs_apply_until_forgotten(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    fake.set_model("model-a", status=503, retry_after=2)
    url = fake.base_url() + "/chat/completions"
    failing = await client.post(url, json={"model": model_with("model-a", chunks=1)})
    assert failing.status_code == 503 and failing.headers["retry-after"] == "2"
    assert (await client.post(url, json={"model": "model-b"})).status_code == 200
    assert (await client.post(url, json={"model": "model-a"})).status_code == 503
    fake.set_model("model-a")
    assert (await client.post(url, json={"model": "model-a"})).status_code == 200
    assert fake.stats == {"chat": 4, "failed": 2, "connections": 1}


async def test_per_model_knobs_rank_below_the_script_and_above_headers(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    fake.set_model("gpt-4o", status=502)
    url, headers, body = request_parts(fake, "header", {"status": 500}, {})
    assert (await client.post(url, json=body, headers=headers)).status_code == 502
    fake.script({"status": 504})
    assert (await client.post(url, json=body, headers=headers)).status_code == 504


async def test_models_and_stats_endpoints(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    set_a = {"model": "model-a", "knobs": {"status": 404}}
    assert (await client.post(fake.url + "/_fake/models", json=set_a)).json() == set_a
    url = fake.base_url() + "/chat/completions"
    gone = await client.post(url, json={"model": "model-a"})
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "model_not_found"
    stats = (await client.get(fake.url + "/_fake/stats")).json()
    assert stats == {"chat": 1, "failed": 1, "connections": 1}
    bad = await client.post(fake.url + "/_fake/models", json={"model": "x", "knobs": {"no": 1}})
    assert bad.status_code == 400
    assert (await client.post(fake.url + "/_fake/models", json={"knobs": {}})).status_code == 400
    await client.post(fake.url + "/_fake/models", json={"model": "model-a", "knobs": None})
    assert (await client.post(url, json={"model": "model-a"})).status_code == 200


async def test_reset_forgets_model_knobs_and_counters(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    fake.set_model("gpt-4o", status=500)
    assert (await post(client, fake)).status_code == 500
    fake.reset()
    assert fake.stats == {"chat": 0, "failed": 0, "connections": 0}
    assert (await post(client, fake)).status_code == 200
