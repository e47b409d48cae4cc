"""What the stream tests over real HTTP share: the fake upstream's answer shapes, the official
``openai`` SDK as the client, the raw bytes as relayed, and the settings a test changes for a
block."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import openai
import orjson

from omniroute.tools.fakeupstream import FakeUpstream
from omniroute.tools.fakeupstream.wire import content
from tests.e2e.conftest import Gateway, Route, records

CHUNKS, SIZE = 12, 8
WHOLE = content(CHUNKS * SIZE)  # what every healthy target of these tests answers
SHAPE = {"chunks": CHUNKS, "chunk_size": SIZE, "chunk_interval_ms": 20}
CUT = {**SHAPE, "cut": "mid", "mid_at": 5}
STALL = {**SHAPE, "stall": "mid", "mid_at": 5}  # longer than the e2e idle limit (1.5 s)


def sdk(gateway: Gateway, route: Route) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=route.key, max_retries=0)


def stream_text(gateway: Gateway, route: Route, **extra: Any) -> tuple[str, list[Any]]:
    """The text the SDK assembles from a streamed answer, and its chunks."""
    chunks = list(
        sdk(gateway, route).chat.completions.create(
            model=route.model(),
            messages=[{"role": "user", "content": "x"}],
            stream=True,
            **extra,
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return text, chunks


def raw_stream(
    gateway: Gateway, route: Route, headers: dict[str, str] | None = None, within: float = 30
) -> httpx.Response:
    """The whole streamed answer, which must end ``within`` seconds (keep-alives that keep
    every read short do not make it last longer)."""
    body = {"model": route.model(), "stream": True, "messages": [{"role": "user", "content": "x"}]}
    ends = time.monotonic() + within
    with gateway.client(route.key, timeout=within) as client:
        parts = []
        with client.stream("POST", "/chat/completions", json=body, headers=headers) as response:
            for part in response.iter_bytes():
                parts.append(part)
                assert time.monotonic() < ends, f"the stream went on past {within} s"
        content = b"".join(parts)
        return httpx.Response(response.status_code, headers=response.headers, content=content)


def sse_text(response: httpx.Response) -> str:
    text = []
    for line in response.text.splitlines():
        data = line.removeprefix("data: ")
        if line.startswith("data: ") and data != "[DONE]":
            for choice in orjson.loads(data).get("choices", []):
                text.append(choice.get("delta", {}).get("content") or "")
    return "".join(text)


def catalog(gateway: Gateway, route: Route, **fields: Any) -> None:
    gateway.post("/api/model-catalog/", {"provider": route.provider, "model": "gpt-test", **fields})


@contextmanager
def resilience(gateway: Gateway, patch: dict[str, Any]) -> Iterator[None]:
    """Resilience settings changed for the block, then put back."""
    before = gateway.api.get("/api/resilience").json()
    assert gateway.api.patch("/api/resilience", json=patch).status_code == 200
    try:
        yield
    finally:
        assert gateway.api.patch("/api/resilience", json=before).status_code == 200


def prefills(fake: FakeUpstream, route: Route, connection: int) -> list[str]:
    """The assistant prefills the n-th connection was sent."""
    return [
        r.body["messages"][-1]["content"]
        for r in records(fake, route, connection)
        if r.body["messages"][-1]["role"] == "assistant"
    ]
