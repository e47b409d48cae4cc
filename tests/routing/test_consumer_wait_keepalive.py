"""A streaming client whose combo waits out a cooldown: the answer's
head (200, ``text/event-stream``) and an SSE comment go out before the wait, so that a long
wait does not trip the client's first-byte timeout. A wait that ends in a success continues
that stream (no second head); one that ends in a failure tells it in-band, as Chat
Completions' error event and ``[DONE]``. A request that does not wait keeps its status line.
Neither the head nor a keep-alive is the first token: the time to it, which the histogram and
the request log both report, runs until the answer's first token went out.

The waits run on the fake clock: the pause below advances it and notes how many messages the
app had sent the client when the wait began.
"""

from __future__ import annotations

from typing import Any

import pytest

import routing.proxy.clock as proxy_clock
import routing.proxy.shell as shell
from omniroute.core.observability.requestlog.record import RequestRecord
from routing.domain.streams.chat import error_event
from routing.domain.streams.sse import DONE_EVENT
from routing.models import Combo, Provider
from routing.proxy.relay import KEEP_ALIVE
from routing.proxy.telemetry import AccessRecord, RequestMetrics
from routing.services import combo_save
from tests.routing.harness import (
    PRIMARY,
    Behaviour,
    Gateway,
    Reply,
    by_model,
    chat,
    communicator,
    error,
    in_turn,
    read_reply,
    send_body,
)
from tests.routing.stream_support import answer_chunks, streaming

pytestmark = pytest.mark.django_db(transaction=True)


def limited(seconds: int) -> Behaviour:
    return error(429, "slow down", "rate_limit_exceeded", {"retry-after": str(seconds)})


@pytest.fixture
def duo(acme: Provider, primary: int) -> None:
    targets = [{"provider": acme, "model": "m1"}, {"provider": acme, "model": "m2"}]
    combo_save(combo=Combo(), fields={"name": "duo"}, targets=targets)


async def streamed(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch, *, stream: bool = True
) -> tuple[Reply, list[int]]:
    """One request to ``duo``; its reply, and how many messages the client had received when
    each wait began."""
    comm = communicator(gateway.app, gateway.key)
    sent_before_waits: list[int] = []
    # Count what the app sent, not what is still queued: the reader drains the queue while the
    # app runs (a wait may begin after an awaited write let the reader take the head).
    sent = 0
    queue = comm.output_queue
    put_nowait = queue.put_nowait  # asyncio.Queue.put goes through it

    def counting_put_nowait(message: Any) -> None:
        nonlocal sent
        sent += 1
        put_nowait(message)

    monkeypatch.setattr(queue, "put_nowait", counting_put_nowait)

    async def pause(seconds: float) -> None:
        sent_before_waits.append(sent)
        gateway.clock.advance(seconds)

    monkeypatch.setattr(proxy_clock, "pause", pause)
    await send_body(comm, chat("duo", stream=stream))
    return await read_reply(comm), sent_before_waits


def is_a_stream(reply: Reply) -> bool:
    return reply.status == 200 and reply.headers["content-type"] == "text/event-stream"


async def test_the_head_and_a_keep_alive_go_out_before_a_wait_that_ends_in_a_stream(
    gateway: Gateway, duo: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway.fake.behaviours[PRIMARY] = by_model(
        m1=in_turn(limited(10), streaming(answer_chunks())), m2=limited(10)
    )

    reply, sent_before_waits = await streamed(gateway, monkeypatch)

    assert sent_before_waits == [2]  # the head and the comment, before the pause
    assert is_a_stream(reply) and "x-omniroute-request-id" in reply.headers
    assert reply.chunks[0] == KEEP_ALIVE
    # the head went out before the decision: it leads the body as an SSE comment
    decision = reply.chunks[1]
    assert decision.startswith(b": x-omniroute-decision: strategy=") and decision.endswith(b"\n\n")
    assert b"; attempts=3" in decision
    assert reply.body == KEEP_ALIVE + decision + b"".join(answer_chunks())  # the stream, as it came
    assert gateway.fake.sent == [(PRIMARY, "m1"), (PRIMARY, "m2"), (PRIMARY, "m1")]


async def test_a_wait_that_ends_in_a_failure_tells_it_in_band_then_done(
    gateway: Gateway, duo: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway.fake.behaviours[PRIMARY] = by_model(
        m1=in_turn(limited(10), limited(200)), m2=in_turn(limited(10), limited(200))
    )

    reply, sent_before_waits = await streamed(gateway, monkeypatch)

    assert sent_before_waits == [2]  # one wait: the second pass's 200 s are past maxWaitMs
    assert is_a_stream(reply)
    told = error_event("slow down (HTTP 429; reset after 200s)", "rate_limit_exceeded")
    assert reply.body == KEEP_ALIVE + told + DONE_EVENT
    assert len(gateway.fake.requests) == 4


async def test_each_wait_sends_its_own_keep_alive_and_one_head(
    gateway: Gateway, duo: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway.fake.behaviours[PRIMARY] = by_model(
        m1=in_turn(limited(10), limited(10), streaming(answer_chunks())),
        m2=in_turn(limited(10), limited(10)),
    )

    reply, sent_before_waits = await streamed(gateway, monkeypatch)

    assert sent_before_waits == [2, 3]
    assert is_a_stream(reply)
    decision = reply.chunks[2]  # after the two keep-alives: the decision, as a comment
    assert decision.startswith(b": x-omniroute-decision: ")
    assert reply.body == KEEP_ALIVE * 2 + decision + b"".join(answer_chunks())


@pytest.mark.parametrize("stream", [False, True])
async def test_a_request_that_does_not_wait_keeps_its_status_line(
    gateway: Gateway, duo: None, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    gateway.fake.behaviours[PRIMARY] = limited(200)  # past maxWaitMs: no wait

    reply, sent_before_waits = await streamed(gateway, monkeypatch, stream=stream)

    assert sent_before_waits == []
    assert (reply.status, reply.headers["retry-after"]) == (429, "200")
    body: Any = reply.json()
    assert body["error"]["message"] == "slow down"


async def test_a_non_streaming_wait_sends_nothing_before_its_answer(
    gateway: Gateway, duo: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway.fake.behaviours[PRIMARY] = by_model(
        m1=in_turn(limited(10), limited(200)), m2=in_turn(limited(10), limited(200))
    )

    reply, sent_before_waits = await streamed(gateway, monkeypatch, stream=False)

    assert sent_before_waits == [0]
    assert (reply.status, reply.headers["content-type"]) == (429, "application/json")


class Recorded:
    """What the consumer recorded for its request: the metrics and the request-log record."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.metrics: list[RequestMetrics] = []
        self.records: list[RequestRecord] = []
        record_request = shell.record_request

        def recording(access: AccessRecord, metrics: RequestMetrics) -> None:
            self.metrics.append(metrics)
            record_request(access, metrics)

        monkeypatch.setattr(shell, "record_request", recording)
        monkeypatch.setattr(shell, "request_log_writer", lambda: self)

    def submit(self, record: RequestRecord) -> bool:
        self.records.append(record)
        return True


async def test_the_first_token_is_measured_once_and_keep_alives_are_not_one(
    gateway: Gateway, duo: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given: both targets refuse for 10 s, so the head and a keep-alive go out, then the wait
    gateway.fake.behaviours[PRIMARY] = by_model(
        m1=in_turn(limited(10), streaming(answer_chunks())), m2=limited(10)
    )
    recorded = Recorded(monkeypatch)

    reply, _ = await streamed(gateway, monkeypatch)

    # then: the first token came after the wait, and the histogram and the log say the same
    assert reply.chunks[0] == KEEP_ALIVE
    [metrics], [record] = recorded.metrics, recorded.records
    assert metrics.first_token_seconds is not None and metrics.first_token_seconds >= 10
    assert record.time_to_first_token_ms == int(metrics.first_token_seconds * 1000)
