"""The fake upstream's ``max_tools`` knob on every answer route (no Django models, no DB): a
request carrying more tools than the model takes is a 400 in the route's error shape whose
message says ``max N``; at or under the limit, the answer is normal."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from omniroute.tools.fakeupstream import Behaviour, FakeUpstream
from tests.tools.fakeupstream.support import CHANNELS, request_parts

ROUTES = ("chat/completions", "responses", "messages")
TOOL = {"type": "function", "name": "f", "parameters": {"type": "object"}}


async def ask(
    client: httpx.AsyncClient,
    fake: FakeUpstream,
    route: str,
    knobs: dict[str, Any],
    body: dict[str, Any],
    channel: str = "path",
) -> httpx.Response:
    """POST ``body`` to ``route`` carrying ``knobs`` through ``channel``."""
    url, headers, payload = request_parts(fake, channel, knobs, body)
    url = url.removesuffix("chat/completions") + route
    return await client.post(url, json=payload, headers=headers)


def error_of(route: str, resp: httpx.Response) -> dict[str, Any]:
    """The error object of an answer in ``route``'s shape, checking that shape."""
    data = resp.json()
    if route == "messages":
        assert data["type"] == "error" and set(data["error"]) == {"type", "message"}
    else:
        assert set(data) == {"error"} and set(data["error"]) == {"message", "type", "code"}
    error: dict[str, Any] = data["error"]
    return error


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("stream", [False, True])
async def test_too_many_tools_is_a_400_saying_max_n(
    fake: FakeUpstream, client: httpx.AsyncClient, route: str, stream: bool
) -> None:
    body = {"tools": [TOOL] * 3, "stream": stream}
    resp = await ask(client, fake, route, {"max_tools": 2}, body)
    assert resp.status_code == 400
    error = error_of(route, resp)
    assert error["type"] == "invalid_request_error"
    assert error["message"] == (
        "too many tools: this model supports at most 2 tools (max 2), got 3"
    )
    assert fake.stats == {"chat": 1, "failed": 1, "connections": 1}
    assert fake.requests[-1].path.endswith("/" + route) and fake.requests[-1].completed


@pytest.mark.parametrize("route", ROUTES)
async def test_at_or_under_the_limit_answers(
    fake: FakeUpstream, client: httpx.AsyncClient, route: str
) -> None:
    bodies: list[dict[str, Any]] = [{"tools": [TOOL] * 2}, {"tools": []}, {}]
    for body in bodies:
        assert (await ask(client, fake, route, {"max_tools": 2}, body)).status_code == 200
    assert (await ask(client, fake, route, {"max_tools": 0}, {"tools": []})).status_code == 200
    assert fake.stats["failed"] == 0


@pytest.mark.parametrize("channel", CHANNELS)
async def test_max_tools_via_each_channel(
    fake: FakeUpstream, client: httpx.AsyncClient, channel: str
) -> None:
    knobs, body = {"max_tools": 0}, {"tools": [TOOL]}
    resp = await ask(client, fake, "chat/completions", knobs, body, channel)
    assert resp.status_code == 400 and "(max 0), got 1" in error_of("chat", resp)["message"]


async def test_status_comes_first_and_error_rate_keeps_the_limit(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    over = {"tools": [TOOL] * 2}
    resp = await ask(client, fake, "messages", {"max_tools": 1, "status": 503}, over)
    assert resp.status_code == 503
    resp = await ask(client, fake, "responses", {"max_tools": 1, "error_rate": 0}, over)
    assert resp.status_code == 400 and "(max 1)" in error_of("responses", resp)["message"]


def test_max_tools_validation() -> None:
    assert Behaviour().with_knobs({"max_tools": "3"}).max_tools == 3
    assert Behaviour(max_tools=3).with_knobs({"max_tools": "none"}).max_tools is None
    assert Behaviour(max_tools=0, status=503).healthy().max_tools == 0
    assert not Behaviour(max_tools=0).fails
    for bad in ("-1", "many"):
        with pytest.raises(ValueError):
            Behaviour().with_knobs({"max_tools": bad})
