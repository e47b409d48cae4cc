"""Garbage is a failure, over real HTTP (the production aiohttp transport, not a mock).

A 200 whose body is HTML, empty, or (for a stream request) JSON is a failed attempt: the next
connection answers; with no next connection the client gets a 502 ``upstream_malformed_response``.
"""

from __future__ import annotations

from typing import Any

import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, make_route, records

pytestmark = pytest.mark.e2e

HTML = "<!DOCTYPE html><html><body><h1>Welcome to nginx!</h1></body></html>"
GARBAGE: dict[str, tuple[dict[str, Any], bool]] = {
    "html": ({"status": 200, "body": HTML}, False),
    "empty": ({"status": 200, "body": ""}, False),
    "json to a stream": ({"status": 200, "body": '{"id": "x", "choices": []}'}, True),
    "html to a stream": ({"status": 200, "body": HTML}, True),
}


def ask(gateway: Gateway, key: str, model: str, stream: bool) -> Any:
    body = {"model": model, "stream": stream, "messages": [{"role": "user", "content": "x"}]}
    with gateway.client(key) as client:
        response = client.post("/chat/completions", json=body)
        response.read()
        return response


@pytest.mark.parametrize(("knobs", "stream"), GARBAGE.values(), ids=GARBAGE.keys())
def test_garbage_fails_over_to_the_next_connection(
    gateway: Gateway, fake: FakeUpstream, knobs: dict[str, Any], stream: bool
) -> None:
    route = make_route(gateway, fake, knobs, {})

    response = ask(gateway, route.key, route.model(), stream)

    assert response.status_code == 200
    assert f"connection={route.connections[1]}" in response.headers["x-omniroute-decision"]
    assert len(records(fake, route, 2)) == 1
    if stream:
        assert response.text.rstrip().endswith("data: [DONE]")
    else:
        assert response.json()["choices"][0]["message"]["content"]


@pytest.mark.parametrize(("knobs", "stream"), GARBAGE.values(), ids=GARBAGE.keys())
def test_garbage_from_the_only_connection_is_a_502(
    gateway: Gateway, fake: FakeUpstream, knobs: dict[str, Any], stream: bool
) -> None:
    route = make_route(gateway, fake, knobs)

    response = ask(gateway, route.key, route.model(), stream)

    assert response.status_code == 502
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("upstream_error", "upstream_malformed_response")
    assert "nginx" not in response.text
