"""Request builders and stream readers shared by the fake upstream tests."""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from routing.fakeupstream import FakeUpstream, RequestRecord, model_with

CHANNELS = ("header", "model", "path", "script")


def request_parts(
    fake: FakeUpstream, channel: str, knobs: dict[str, Any], body: dict[str, Any]
) -> tuple[str, dict[str, str], dict[str, Any]]:
    """URL, headers and JSON body carrying ``knobs`` through ``channel``."""
    url, headers, body = fake.base_url() + "/chat/completions", {}, {"model": "gpt-4o", **body}
    if channel == "header":
        headers = {f"x-fake-{k.replace('_', '-')}": str(v) for k, v in knobs.items()}
    elif channel == "model":
        body["model"] = model_with("gpt-4o", **knobs)
    elif channel == "path":
        url = fake.base_url(**knobs) + "/chat/completions"
    elif knobs:
        fake.script(knobs)
    return url, headers, body


async def post(
    client: httpx.AsyncClient,
    fake: FakeUpstream,
    channel: str = "header",
    knobs: dict[str, Any] | None = None,
    **body: Any,
) -> httpx.Response:
    """POST a chat completion to ``fake`` carrying ``knobs`` through ``channel``."""
    url, headers, payload = request_parts(fake, channel, knobs or {}, body)
    return await client.post(url, json=payload, headers=headers)


def sse_data(text: str) -> list[str]:
    """The payloads of the ``data:`` lines of an SSE body."""
    return [line[6:] for line in text.splitlines() if line.startswith("data: ")]


def deltas(events: list[str]) -> list[dict[str, Any]]:
    """The first choice's delta of every chunk event (``[DONE]`` skipped)."""
    return [orjson.loads(e)["choices"][0]["delta"] for e in events if e != "[DONE]"]


def last(fake: FakeUpstream) -> RequestRecord:
    """The latest request ``fake`` recorded."""
    return fake.requests[-1]
