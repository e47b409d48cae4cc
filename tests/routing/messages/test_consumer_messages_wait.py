"""A streaming Messages client whose combo waits out a cooldown: the head
(200, ``text/event-stream``) and an SSE comment go out before the wait; a success continues that
stream, a failure is told in-band as Anthropic's ``error`` event, then ``message_stop``.

The waits run on the fake clock: the pause below advances it and notes how many messages the
client had been sent when the wait began.
"""

from __future__ import annotations

import pytest
from channels.testing import ApplicationCommunicator

import routing.proxy.clock as proxy_clock
from routing.domain.streams.messages import MESSAGE_STOP, MessagesStream
from routing.models import Combo, Provider
from routing.proxy.relay import KEEP_ALIVE
from routing.services import combo_save
from tests.routing.format_support import (
    CLAUDE_PRIMARY,
    Relay,
    anthropic_error,
    messages_events,
    messages_request,
    scope_of,
    x_api_key,
)
from tests.routing.harness import Behaviour, Reply, by_model, in_turn, read_reply, send_body
from tests.routing.stream_support import streaming

pytestmark = pytest.mark.django_db(transaction=True)


def limited(seconds: int) -> Behaviour:
    return anthropic_error(429, "rate_limit_error", "slow down", {"retry-after": str(seconds)})


@pytest.fixture
def duo(claude: Provider, first: int) -> None:
    targets = [{"provider": claude, "model": "opus"}, {"provider": claude, "model": "sonnet"}]
    combo_save(combo=Combo(), fields={"name": "duo"}, targets=targets)


async def streamed(relay: Relay, monkeypatch: pytest.MonkeyPatch) -> tuple[Reply, list[int]]:
    """One streaming request to ``duo``; its reply, and how many messages the client had
    received when each wait began."""
    comm = ApplicationCommunicator(relay.app, scope_of("POST", relay.path, x_api_key(relay.key)))
    sent_before_waits: list[int] = []

    async def pause(seconds: float) -> None:
        sent_before_waits.append(comm.output_queue.qsize())
        relay.clock.advance(seconds)

    monkeypatch.setattr(proxy_clock, "pause", pause)
    await send_body(comm, messages_request("duo", stream=True))
    return await read_reply(comm), sent_before_waits


async def test_a_wait_that_ends_in_a_stream_continues_the_head_sent_before_it(
    relay: Relay, duo: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    relay.fake.behaviours[CLAUDE_PRIMARY] = by_model(
        opus=in_turn(limited(10), streaming(messages_events())), sonnet=limited(10)
    )

    reply, sent_before_waits = await streamed(relay, monkeypatch)

    assert sent_before_waits == [2]
    assert (reply.status, reply.headers["content-type"]) == (200, "text/event-stream")
    decision = reply.chunks[1]  # the head went out first: the decision leads as a comment
    assert decision.startswith(b": x-omniroute-decision: ") and b"target=claude/opus" in decision
    assert reply.body == KEEP_ALIVE + decision + b"".join(messages_events())
    assert [body["model"] for body in relay.fake.bodies()] == ["opus", "sonnet", "opus"]


async def test_a_wait_that_ends_in_a_failure_ends_with_an_error_event_and_message_stop(
    relay: Relay, duo: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    relay.fake.behaviours[CLAUDE_PRIMARY] = by_model(
        opus=in_turn(limited(10), limited(200)), sonnet=in_turn(limited(10), limited(200))
    )

    reply, sent_before_waits = await streamed(relay, monkeypatch)

    assert sent_before_waits == [2]
    assert (reply.status, reply.headers["content-type"]) == (200, "text/event-stream")
    told = MessagesStream().error_event(
        "slow down (HTTP 429; reset after 200s)", "rate_limit_error"
    )
    assert reply.body == KEEP_ALIVE + told + MESSAGE_STOP
    assert len(relay.fake.requests) == 4
