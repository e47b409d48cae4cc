"""Request builders and stream readers shared by the fake upstream tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import orjson

from omniroute.tools.fakeupstream import FakeUpstream, RequestRecord, model_with

CHANNELS = ("header", "model", "path", "script")
READ_TIMEOUT_S = 0.3  # long enough for a whole answer here, short enough for stall tests


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


def text_of(events: list[str], field: str = "content") -> str:
    """The concatenated ``field`` (content, or reasoning_content) of every chunk's deltas."""
    chunks = [orjson.loads(e)["choices"] for e in events if e != "[DONE]"]
    return "".join(c["delta"].get(field, "") for choices in chunks for c in choices)


async def read_until(
    client: httpx.AsyncClient,
    parts: tuple[str, dict[str, str], dict[str, Any]],
    enough: Callable[[list[str]], bool],
) -> tuple[list[str], bool]:
    """The lines of a streamed answer read until ``enough(lines)``, the end of the body or
    a read timeout (:data:`READ_TIMEOUT_S`); and whether the read timed out."""
    url, headers, body = parts
    lines: list[str] = []
    try:
        async with client.stream(
            "POST", url, json=body, headers=headers, timeout=READ_TIMEOUT_S
        ) as r:
            async for line in r.aiter_lines():
                lines.append(line)
                if enough(lines):
                    break
    except httpx.ReadTimeout:
        return lines, True
    return lines, False


def named_events(text: str) -> list[tuple[str, str]]:
    """The ``(event, data)`` pairs of an SSE body whose events carry ``event:`` lines (the
    Responses and Messages APIs); comments and events without data are skipped."""
    pairs, name = [], ""
    for line in text.splitlines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            pairs.append((name, line[6:]))
            name = ""
    return pairs


def is_transport_error(exc: BaseException) -> bool:
    """A dropped connection as an SDK surfaces it: its ``APIConnectionError``, or the raw
    transport error of the HTTP library under it (which the SDKs do not re-export)."""
    return bool({c.__name__ for c in type(exc).__mro__} & {"APIConnectionError", "TransportError"})
