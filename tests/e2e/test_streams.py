"""Streams over real HTTP with the official ``openai`` SDK as the client: limits before the
first token, and after commit a cut or a stall is finished (prefill continuation or
regenerate-and-splice) or ended honestly, never duplicated. What the upstream gets wrong in
what it sends is in ``test_stream_quirks``."""

from __future__ import annotations

import time
from typing import Any

import httpx
import orjson
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from omniroute.tools.fakeupstream.wire import content
from tests.e2e.conftest import Gateway, make_route, records
from tests.e2e.stream_support import (
    CUT,
    SHAPE,
    SIZE,
    STALL,
    WHOLE,
    catalog,
    prefills,
    raw_stream,
    resilience,
    sse_text,
    stream_text,
)

pytestmark = pytest.mark.e2e


# --- before the first token -------------------------------------------------------------------


def test_a_silent_upstream_is_tried_once_and_the_next_answers(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, {"stall": "before"}, SHAPE)
    started = time.monotonic()

    text, _ = stream_text(gateway, route)

    assert text == WHOLE
    assert len(records(fake, route, 1)) == 1
    assert time.monotonic() - started < 5  # the 1.5 s idle limit, not the 60 s first-token one


def test_a_first_token_slower_than_its_limit_fails_over_before_any_byte(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    slow = {**SHAPE, "latency_ms": 1000, "chunk_interval_ms": 500}  # headers after 1 s
    route = make_route(gateway, fake, slow, SHAPE)
    catalog(gateway, route, time_to_first_token_ms=1000)

    response = raw_stream(gateway, route)

    assert response.status_code == 200
    assert f"connection={route.connections[1]}" in response.headers["x-omniroute-decision"]
    assert sse_text(response) == WHOLE and "error" not in response.text


def test_three_silent_targets_and_a_ten_second_deadline_answer_504_in_time(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    silent = {"stall": "before"}
    route = make_route(gateway, fake, silent, silent, silent)
    catalog(gateway, route, time_to_first_token_ms=600_000, stream_idle_ms=600_000)
    started = time.monotonic()

    response = raw_stream(gateway, route, {"x-omniroute-deadline-ms": "10000"})

    assert response.status_code == 504
    assert response.json()["error"]["code"] == "request_deadline_exceeded"
    assert time.monotonic() - started < 11


# --- after commit: a cut or a stall -----------------------------------------------------------


@pytest.mark.parametrize("failure", [CUT, STALL], ids=["cut", "stall"])
def test_a_broken_stream_is_continued_on_a_prefill_accepting_target(
    gateway: Gateway, fake: FakeUpstream, failure: dict[str, Any]
) -> None:
    route = make_route(gateway, fake, failure, {**SHAPE, "prefill": "accept"})
    catalog(gateway, route, accepts_prefill="yes")

    text, chunks = stream_text(gateway, route)

    assert text == WHOLE  # the whole answer, exactly once
    assert len({c.id for c in chunks}) == 1  # one stream as the client sees it
    assert prefills(fake, route, 2) == [WHOLE[: 5 * SIZE]]


@pytest.mark.parametrize("failure", [CUT, STALL], ids=["cut", "stall"])
def test_a_broken_stream_is_completed_by_regeneration_without_any_prefill(
    gateway: Gateway, fake: FakeUpstream, failure: dict[str, Any]
) -> None:
    route = make_route(gateway, fake, failure, {**SHAPE, "prefill": "reject"})
    catalog(gateway, route, accepts_prefill="no")

    text, _ = stream_text(gateway, route)

    assert text == WHOLE
    assert prefills(fake, route, 2) == []
    assert len(records(fake, route, 2)) == 1


@pytest.mark.parametrize("failure", [CUT, STALL], ids=["cut", "stall"])
def test_a_regeneration_that_differs_ends_with_an_error_event_and_no_done(
    gateway: Gateway, fake: FakeUpstream, failure: dict[str, Any]
) -> None:
    route = make_route(gateway, fake, failure, {**SHAPE, "text": "alt"})

    response = raw_stream(gateway, route)

    assert response.status_code == 200
    assert sse_text(response) == WHOLE[: 5 * SIZE]  # nothing of the other answer
    last = response.text.strip().splitlines()[-1]
    assert orjson.loads(last.removeprefix("data: "))["error"]["code"] == (
        "upstream_stream_interrupted"
    )
    assert "[DONE]" not in response.text


# --- after commit: idle, and the client's deadline ---------------------------------------------

TRICKLE = {**SHAPE, "stall": "mid", "mid_at": 1, "heartbeat_ms": 200}  # a token, then pings


def in_band_error(response: httpx.Response) -> dict[str, Any]:
    last = response.text.strip().splitlines()[-1]
    return dict(orjson.loads(last.removeprefix("data: "))["error"])


def test_a_committed_stream_sending_only_comments_ends_at_its_idle_limit(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, TRICKLE)
    catalog(gateway, route, stream_idle_ms=1000)
    started = time.monotonic()

    with resilience(gateway, {"streamRecovery": {"continueMidStream": False}}):
        response = raw_stream(gateway, route, within=5)

    assert 1 <= time.monotonic() - started < 2.5
    assert sse_text(response) == WHOLE[:SIZE] and ": ping" in response.text
    error = in_band_error(response)
    assert error["code"] == "upstream_stream_interrupted" and "stream idle" in error["message"]
    assert "[DONE]" not in response.text


def test_a_client_deadline_ends_a_committed_stream_in_band(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    # 2 s rather than 10 s, ended by 3 s rather than 11 s: the same rule, sooner
    route = make_route(gateway, fake, TRICKLE)
    catalog(gateway, route, stream_idle_ms=600_000)  # only the client's deadline can end it
    started = time.monotonic()

    response = raw_stream(gateway, route, {"x-omniroute-deadline-ms": "2000"}, within=6)

    assert time.monotonic() - started < 3
    assert response.status_code == 200 and sse_text(response) == WHOLE[:SIZE]
    assert in_band_error(response)["code"] == "request_deadline_exceeded"
    assert "[DONE]" not in response.text


LONG = {"chunks": 16, "chunk_size": SIZE, "chunk_interval_ms": 250}  # about 4 s


@pytest.mark.parametrize(
    "first", [LONG, {**LONG, "cut": "mid", "mid_at": 8}], ids=["healthy", "cut-after-2s"]
)
def test_the_default_deadline_never_cuts_a_committed_stream(
    gateway: Gateway, fake: FakeUpstream, first: dict[str, Any]
) -> None:
    # the default deadline at 1 s, a stream of 4 s: healthy, or cut after 2 s and finished on
    # the next target
    route = make_route(gateway, fake, first, LONG)

    with resilience(gateway, {"attempts": {"deadlineMs": 1000}}):
        response = raw_stream(gateway, route, within=15)

    assert sse_text(response) == content(16 * SIZE)
    assert response.text.rstrip().endswith("data: [DONE]") and "error" not in response.text
