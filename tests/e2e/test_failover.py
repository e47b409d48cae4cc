"""Failover before the first byte, over real HTTP: 503, 429, reset and timeout."""

from __future__ import annotations

from typing import Any

import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, make_route, records

pytestmark = pytest.mark.e2e

# The attempt policy: a 503 is retried once on its target before the next; a 429 whose
# Retry-After is past the 5 s wait bound, a reset and a timeout move on at once.
TRIES = {"503": 2, "429": 1, "reset": 1, "timeout": 1}
FAILURES: dict[str, dict[str, Any]] = {
    "503": {"status": 503},
    "429": {"status": 429, "retry_after": 7},
    "reset": {"reset": "before"},
    "timeout": {"stall": "before"},
}


def ask(gateway: Gateway, key: str, model: str, stream: bool) -> Any:
    body = {"model": model, "stream": stream, "messages": [{"role": "user", "content": "x"}]}
    with gateway.client(key) as client:
        response = client.post("/chat/completions", json=body)
        response.read()
        return response


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("failure", list(FAILURES))
def test_fails_over_to_the_next_connection(
    gateway: Gateway, fake: FakeUpstream, failure: str, stream: bool
) -> None:
    route = make_route(gateway, fake, FAILURES[failure], {})
    response = ask(gateway, route.key, route.model(), stream)
    assert response.status_code == 200
    assert f"connection={route.connections[1]}" in response.headers["x-omniroute-decision"]
    tries = TRIES[failure]
    assert f"attempts={tries + 1}" in response.headers["x-omniroute-decision"]
    assert len(records(fake, route, 1)) == tries and len(records(fake, route, 2)) == 1
    if stream:
        assert response.text.rstrip().endswith("data: [DONE]")
    else:
        assert response.json()["choices"][0]["message"]["content"]


def test_when_every_connection_fails_the_last_upstream_error_is_returned(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, {"status": 502}, {"status": 503, "retry_after": 9})
    response = ask(gateway, route.key, route.model(), stream=True)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "9"
    assert set(response.json()["error"]) >= {"message", "type", "code"}
    # the 502 is retried once (backoff), then the 503's 9 s hint is past the wait bound
    assert "attempts=3" in response.headers["x-omniroute-decision"]


@pytest.mark.parametrize(
    ("knobs", "status", "code", "named"),
    [
        ({"reset": "before"}, 502, "upstream_unreachable", "(connection reset by peer)"),
        ({"stall": "before"}, 504, "upstream_timeout", "(read timeout)"),
    ],
)
def test_network_failures_of_the_last_target_are_clean_errors(
    gateway: Gateway,
    fake: FakeUpstream,
    knobs: dict[str, Any],
    status: int,
    code: str,
    named: str,
) -> None:
    route = make_route(gateway, fake, knobs)
    response = ask(gateway, route.key, route.model(), stream=False)
    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    assert named in response.json()["error"]["message"]  # what happened, in the client's words


def test_a_client_error_from_upstream_is_not_retried_elsewhere(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, {"status": 400}, {})
    response = ask(gateway, route.key, route.model(), stream=False)
    assert response.status_code == 400
    assert records(fake, route, 2) == []


def test_a_stream_cut_after_the_first_byte_is_finished_by_the_next_connection(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    # Recovery after commit: the next connection regenerates the same text, and only what the
    # client does not have yet is relayed (tests/e2e/test_streams.py has the other outcomes)
    route = make_route(gateway, fake, {"reset": "mid", "chunk_interval_ms": 10}, {})
    response = ask(gateway, route.key, route.model(), stream=True)
    assert response.status_code == 200
    assert "upstream_stream_interrupted" not in response.text
    assert response.text.rstrip().endswith("data: [DONE]")
    assert len(records(fake, route, 2)) == 1
