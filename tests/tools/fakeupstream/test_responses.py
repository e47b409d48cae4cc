"""What the fake OpenAI-compatible upstream answers (no Django models, no DB): completion,
stream and model-list shapes, and the knobs (status, retry-after, chunks, latency, body, headers)
through each channel, their precedence, and knob validation.
"""

from __future__ import annotations

import time

import httpx
import orjson
import pytest

from omniroute.tools.fakeupstream import Behaviour, FakeUpstream, model_with
from omniroute.tools.fakeupstream.wire import content
from tests.tools.fakeupstream.support import CHANNELS, deltas, last, post, sse_data

# ------------------------------------------------------------------------------ shapes


async def test_non_stream_completion_shape(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    resp = await post(client, fake, model="gpt-4o?latency_ms=0", messages=[])
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "application/json"
    data = resp.json()
    assert data["object"] == "chat.completion"
    assert data["id"].startswith("chatcmpl-fake-")
    assert isinstance(data["created"], int)
    assert data["model"] == "gpt-4o"
    (choice,) = data["choices"]
    assert choice["message"] == {"role": "assistant", "content": content(160)}
    assert choice["finish_reason"] == "stop"
    assert data["usage"]["total_tokens"] == data["usage"]["prompt_tokens"] + 40


async def test_ids_differ_between_requests(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    first, second = (await post(client, fake), await post(client, fake))
    assert first.json()["id"] != second.json()["id"]


async def test_stream_has_20_deltas_finish_and_done(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    resp = await post(client, fake, stream=True)
    assert resp.headers["content-type"].startswith("text/event-stream")
    events = sse_data(resp.text)
    assert len(events) == 22 and events[-1] == "[DONE]"
    chunks = [orjson.loads(e) for e in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert {c["model"] for c in chunks} == {"gpt-4o"}
    assert len({c["id"] for c in chunks}) == 1
    pieces = deltas(events[:20])
    assert pieces[0]["role"] == "assistant" and all("role" not in p for p in pieces[1:])
    assert all(len(p["content"]) == 8 for p in pieces)
    assert "".join(p["content"] for p in pieces) == content(160)
    assert chunks[20]["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "stop"}
    # The handler marks the record completed just after its last write: wait for it.
    assert await fake.wait_for_async(lambda f: last(f).completed, timeout=2)
    rec = last(fake)
    assert rec.stream and rec.completed and rec.chunks_sent == 20


async def test_stream_usage_chunk_on_request(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    resp = await post(client, fake, stream=True, stream_options={"include_usage": True})
    events = sse_data(resp.text)
    usage = orjson.loads(events[-2])
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 40


async def test_models_list(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    resp = await client.get(fake.base_url(status=503) + "/models")
    assert resp.status_code == 200
    data = resp.json()
    assert data["object"] == "list"
    assert "gpt-4o" in {m["id"] for m in data["data"]}
    assert last(fake).method == "GET"


# ------------------------------------------------------------------------------ knobs


@pytest.mark.parametrize("channel", CHANNELS)
async def test_status_and_retry_after_via_each_channel(
    fake: FakeUpstream, client: httpx.AsyncClient, channel: str
) -> None:
    resp = await post(client, fake, channel, {"status": 503, "retry_after": 7}, stream=True)
    assert resp.status_code == 503
    assert resp.headers["retry-after"] == "7"
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "code"} and error["type"] == "server_error"
    assert last(fake).behaviour.status == 503


@pytest.mark.parametrize("channel", CHANNELS)
async def test_chunks_and_chunk_size_via_each_channel(
    fake: FakeUpstream, client: httpx.AsyncClient, channel: str
) -> None:
    knobs = {"chunks": 3, "chunk_size": 2}
    resp = await post(client, fake, channel, knobs, stream=True)
    pieces = deltas(sse_data(resp.text))
    assert [p.get("content") for p in pieces] == ["Th", "e ", "qu", None]


@pytest.mark.parametrize("channel", CHANNELS)
async def test_latency_via_each_channel(
    fake: FakeUpstream, client: httpx.AsyncClient, channel: str
) -> None:
    started = time.monotonic()
    resp = await post(client, fake, channel, {"latency_ms": 60})
    assert resp.status_code == 200
    assert time.monotonic() - started >= 0.06


@pytest.mark.parametrize("channel", CHANNELS)
async def test_chunk_interval_via_each_channel(
    fake: FakeUpstream, client: httpx.AsyncClient, channel: str
) -> None:
    await post(client, fake, channel, {"chunks": 4, "chunk_interval_ms": 20}, stream=True)
    rec = last(fake)
    assert rec.chunks_sent == 4 and rec.last_chunk_at is not None
    assert rec.last_chunk_at - rec.at >= 0.06


async def test_rate_limit_error_type(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    resp = await post(client, fake, "model", {"status": 429})
    assert resp.json()["error"]["type"] == "rate_limit_error"
    assert resp.json()["error"]["code"] == "rate_limit_exceeded"


async def test_body_knob_replaces_answer(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    resp = await post(client, fake, "path", {"status": 502, "body": "<html>bad gateway</html>"})
    assert resp.status_code == 502 and resp.text == "<html>bad gateway</html>"
    assert resp.headers["content-type"].startswith("text/plain")
    resp = await post(client, fake, "header", {"body": "{not json"})
    assert resp.status_code == 200 and resp.text == "{not json"


async def test_headers_knob_in_script(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    fake.script({"headers": {"x-ratelimit-remaining-requests": "0"}, "status": 429})
    resp = await post(client, fake, "script")
    assert resp.status_code == 429
    assert resp.headers["x-ratelimit-remaining-requests"] == "0"


async def test_precedence_script_header_model_path_defaults(client: httpx.AsyncClient) -> None:
    with FakeUpstream(defaults=Behaviour(status=500)).start() as fake:

        async def status(*, script: bool, header: bool, model: bool, path: bool) -> int:
            if script:
                fake.script({"status": 504})
            url = fake.base_url(status=501) if path else fake.base_url()
            body = {"model": model_with("m", status=502) if model else "m"}
            headers = {"x-fake-status": "503"} if header else {}
            resp = await client.post(url + "/chat/completions", json=body, headers=headers)
            return resp.status_code

        assert await status(script=True, header=True, model=True, path=True) == 504
        assert await status(script=False, header=True, model=True, path=True) == 503
        assert await status(script=False, header=False, model=True, path=True) == 502
        assert await status(script=False, header=False, model=False, path=True) == 501
        assert await status(script=False, header=False, model=False, path=False) == 500


async def test_higher_channel_can_switch_off_reset(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    url = fake.base_url(reset="before") + "/chat/completions"
    resp = await client.post(url, json={"model": "m"}, headers={"x-fake-reset": "none"})
    assert resp.status_code == 200


async def test_script_is_fifo_and_used_once(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    fake.script({"status": 500}, {"status": 429})
    codes = [(await post(client, fake)).status_code for _ in range(3)]
    assert codes == [500, 429, 200]


async def test_model_echo_strips_knobs(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    resp = await post(client, fake, "model", {"chunks": 1}, stream=True)
    assert {orjson.loads(e)["model"] for e in sse_data(resp.text)[:-1]} == {"gpt-4o"}
    assert last(fake).model == "gpt-4o"
    assert last(fake).body["model"] == "gpt-4o?chunks=1"


async def test_unknown_or_bad_knob_is_400(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    for knobs in ({"colour": "red"}, {"status": "abc"}, {"reset": "sometimes"}, {"chunks": -1}):
        resp = await post(client, fake, "header", knobs)
        assert resp.status_code == 400, knobs
        assert resp.json()["error"]["type"] == "fake_knob_error"
    with pytest.raises(ValueError):
        fake.script({"status": 99})


def test_urls_and_model_names() -> None:
    fake = FakeUpstream(port=1234)
    assert fake.url == "http://127.0.0.1:1234"
    assert fake.base_url() == "http://127.0.0.1:1234/v1"
    assert fake.base_url(status=503, body="a/b") == (
        "http://127.0.0.1:1234/s/status=503&body=a%2Fb/v1"
    )
    assert model_with("gpt-4o", latency_ms=50) == "gpt-4o?latency_ms=50"
    assert model_with("gpt-4o") == "gpt-4o"


def test_behaviour_validation() -> None:
    assert Behaviour().with_knobs({"status": "429", "reset": "MID"}).reset == "mid"
    assert Behaviour(cut="mid").mid == "cut"
    assert Behaviour(reset="mid", stall="mid").mid == "reset"
    with pytest.raises(ValueError):
        Behaviour(chunk_size=0)
    with pytest.raises(ValueError):
        Behaviour().with_knobs({"headers": "[1, 2]"})
