"""``POST /v1/messages`` streams through the relay consumer: failed over unseen before the first
token; after it, finished by the next target (regenerate and splice) or ended with an in-band
``error`` event; ended with ``message_stop`` when the upstream forgot it."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async

import routing.proxy.streams as routing_streams
from omniroute.core import stopping
from resilience.domain.lockout import LockScope, model_slot
from resilience.services import resilience_settings_update
from resilience.services.lockouts import lockout_record
from routing.domain.streams.messages import MESSAGE_STOP
from routing.proxy.recovery import SHUTDOWN_MESSAGE
from tests.routing.format_support import (
    CLAUDE_BACKUP,
    CLAUDE_PRIMARY,
    MESSAGES_FIRST_TOKEN,
    TEXT,
    Relay,
    messages_events,
    messages_request,
    messages_text,
    named,
    sse,
    x_api_key,
)
from tests.routing.harness import (
    UNAVAILABLE,
    Behaviour,
)
from tests.routing.stream_support import CUT, stopping_after, streaming

pytestmark = pytest.mark.django_db(transaction=True)


# --- 5. streams -------------------------------------------------------------------------------


def ends_with_interruption(reply: Any) -> dict[str, Any]:
    """The error object of the reply's last event, the gateway's in-band error in Anthropic's
    shape; nothing follows it (no ``message_stop``)."""
    name, last = sse(reply)[-1]
    assert name == "error" and last["type"] == "error"
    error_object = last["error"]
    assert (error_object["type"], error_object["code"]) == (
        "api_error",
        "upstream_stream_interrupted",
    )
    assert error_object["message"]
    assert b"message_stop" not in reply.body
    return dict(error_object)


async def test_a_stream_cut_after_its_first_token_is_finished_by_the_next_target(
    relay: Relay, pair: tuple[int, int]
) -> None:
    sent = messages_events()[: MESSAGES_FIRST_TOKEN + 2]  # two deltas
    relay.fake.behaviours.update(
        {
            CLAUDE_PRIMARY: streaming(sent, then=CUT),
            CLAUDE_BACKUP: streaming(messages_events(ident="msg_02")),
        }
    )

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    assert reply.status == 200
    assert reply.body.startswith(b"".join(sent))
    assert messages_text(reply) == "".join(TEXT)  # regenerated and spliced: nothing twice
    names = [name for name, _ in sse(reply)]
    assert names.count("message_start") == 1 and names[-1] == "message_stop"
    assert names.count("content_block_stop") == 1
    assert relay.fake.calls == [CLAUDE_PRIMARY, CLAUDE_BACKUP]
    broke = await lockout_record(store=relay.store, provider="claude", connection_id=pair[0])
    assert broke.failures[model_slot("opus", LockScope.EXACT)].consecutive == 1


async def test_with_continuation_off_a_cut_stream_ends_with_an_error_event(
    relay: Relay, pair: tuple[int, int]
) -> None:
    patch = {"streamRecovery": {"continueMidStream": False}}
    await database_sync_to_async(resilience_settings_update)(patch=patch)
    sent = messages_events()[: MESSAGES_FIRST_TOKEN + 2]
    relay.fake.behaviours.update(
        {
            CLAUDE_PRIMARY: streaming(sent, then=CUT),
            CLAUDE_BACKUP: streaming(messages_events(ident="msg_02")),
        }
    )

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    assert reply.body.startswith(b"".join(sent))
    assert len(sse(reply)) == len(sent) + 1
    ends_with_interruption(reply)
    assert messages_text(reply) == "".join(TEXT[:2])
    assert relay.fake.calls == [CLAUDE_PRIMARY]


async def test_an_in_band_error_after_the_first_token_ends_with_the_gateways_error_event(
    relay: Relay, first: int
) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    sent = messages_events()[: MESSAGES_FIRST_TOKEN + 1]
    relay.fake.behaviours[CLAUDE_PRIMARY] = streaming([*sent, named("error", overloaded)])

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    assert reply.body.startswith(b"".join(sent))
    ends_with_interruption(reply)
    assert reply.body.count(b"event: error") == 1


async def test_a_tool_use_block_commits_the_stream(relay: Relay, pair: tuple[int, int]) -> None:
    start, tool = (
        messages_events()[0],
        named(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "lookup",
                    "input": {},
                },
            },
        ),
    )
    relay.fake.behaviours.update(
        {
            CLAUDE_PRIMARY: streaming([start, tool], then=CUT),
            CLAUDE_BACKUP: streaming(messages_events(ident="msg_02")),
        }
    )

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    assert reply.body.startswith(start + tool)  # the tool's name reached the client
    ends_with_interruption(reply)
    assert relay.fake.calls == [CLAUDE_PRIMARY]


OVERLOADED_EVENT = named(
    "error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
)
BEFORE_FIRST_TOKEN = {
    "cut": streaming(messages_events()[:MESSAGES_FIRST_TOKEN], then=CUT),
    "ended": streaming(messages_events()[:MESSAGES_FIRST_TOKEN]),
    "in-band-error": streaming([messages_events()[0], OVERLOADED_EVENT]),
}


@pytest.mark.parametrize("failure", BEFORE_FIRST_TOKEN.values(), ids=BEFORE_FIRST_TOKEN.keys())
async def test_a_stream_failing_before_its_first_token_fails_over_unseen(
    relay: Relay, pair: tuple[int, int], failure: Behaviour
) -> None:
    second = messages_events(ident="msg_02")
    relay.fake.behaviours.update({CLAUDE_PRIMARY: failure, CLAUDE_BACKUP: streaming(second)})

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    assert (reply.status, reply.connection) == (200, pair[1])
    assert reply.body == b"".join(second)  # nothing of the first stream, nothing twice
    assert relay.fake.calls[0] == CLAUDE_PRIMARY and relay.fake.calls[-1] == CLAUDE_BACKUP


@pytest.mark.parametrize("then", [None, CUT], ids=["ended", "reset"])
async def test_a_stream_ending_after_message_delta_gets_its_message_stop(
    relay: Relay, pair: tuple[int, int], then: BaseException | None
) -> None:
    sent = messages_events(stop=False)
    relay.fake.behaviours.update(
        {CLAUDE_PRIMARY: streaming(sent, then=then), CLAUDE_BACKUP: UNAVAILABLE}
    )

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    assert reply.body == b"".join(sent) + MESSAGE_STOP
    assert relay.fake.calls == [CLAUDE_PRIMARY]
    record = await lockout_record(store=relay.store, provider="claude", connection_id=pair[0])
    assert record.failures == {}


async def test_a_stream_ending_before_message_delta_ends_with_an_error_event(
    relay: Relay, first: int
) -> None:
    sent = messages_events()[:-2]  # up to content_block_stop: no stop reason yet
    relay.fake.behaviours[CLAUDE_PRIMARY] = streaming(sent)

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    assert reply.body.startswith(b"".join(sent))
    ends_with_interruption(reply)


async def test_a_stream_lingering_after_message_delta_is_ended_with_message_stop(
    relay: Relay, first: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(routing_streams, "FINISH_GRACE_SECONDS", 0.01)
    sent = messages_events(stop=False)
    relay.fake.behaviours[CLAUDE_PRIMARY] = streaming(sent, hang=True)

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    assert reply.body == b"".join(sent) + MESSAGE_STOP


async def test_an_answer_without_content_is_relayed_not_failed_over(
    relay: Relay, pair: tuple[int, int]
) -> None:
    events = messages_events()
    empty = [events[0], events[-2], events[-1]]  # message_start, message_delta, message_stop
    relay.fake.behaviours.update(
        {CLAUDE_PRIMARY: streaming(empty), CLAUDE_BACKUP: streaming(messages_events())}
    )

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    assert (reply.connection, reply.body) == (pair[0], b"".join(empty))
    assert relay.fake.calls == [CLAUDE_PRIMARY]


async def test_an_open_stream_ends_with_an_error_event_when_the_process_stops(
    relay: Relay, first: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    signal = stopping.ShuttingDown()
    monkeypatch.setattr(stopping, "shutting_down", signal)
    sent = messages_events()[: MESSAGES_FIRST_TOKEN + 2]  # two text deltas, then nothing
    relay.fake.behaviours[CLAUDE_PRIMARY] = stopping_after(sent, signal.set)

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    error = {"type": "api_error", "message": SHUTDOWN_MESSAGE, "code": "server_shutting_down"}
    assert sse(reply)[-1] == ("error", {"type": "error", "error": error})
    assert messages_text(reply) == "".join(TEXT[:2])
