"""Fusion and pipeline combos on ``POST /v1/messages``:
the same preludes as for chat, with the answers' text read from the content's text blocks,
the turns added to ``messages``, streams and errors in Anthropic's shape."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from routing.models import Provider
from routing.strategies.fusion import REVIEW_PROMPT
from tests.routing.format_support import (
    Relay,
    anthropic_error,
    anthropic_shaped,
    message_object,
    messages_events,
    messages_request,
    messages_text,
)
from tests.routing.fusion_support import (
    JUDGED,
    body_of,
    is_judge,
    judge_requests,
    last_turn,
    replying,
    sources_in,
    three_step_combo,
    turns,
)
from tests.routing.harness import UNAVAILABLE
from tests.routing.stream_support import streaming

pytestmark = pytest.mark.django_db(transaction=True)

KEYS = ("sk-ant-A-0001", "sk-ant-B-0002", "sk-ant-C-0003")
TEXTS = ("Paris.", "It is Paris.", "Lyon, surely.")
QUESTION = {"role": "user", "content": "Say hi"}  # messages_request's


def message(text: str) -> dict[str, object]:
    return message_object(text=text)


async def combo(claude: Provider, strategy: str) -> list[int]:
    return await database_sync_to_async(three_step_combo)(claude, strategy, KEYS)


def members_answer(relay: Relay) -> None:
    relay.fake.behaviours.update(
        {key: replying(message, text) for key, text in zip(KEYS, TEXTS, strict=True)}
    )


async def test_fusion_judges_three_answers_into_one_message(relay: Relay, claude: Provider) -> None:
    await combo(claude, "fusion")
    members_answer(relay)

    reply = await relay.post(messages_request("team"))

    assert reply.status == 200 and reply.json() == message(JUDGED)
    assert (reply.decision()["panel"], reply.decision()["answered"]) == ("3", "3")
    (judge,) = judge_requests(relay.fake.requests)
    assert turns(body_of(judge))[0] == QUESTION
    assert sources_in(last_turn(judge)) == list(TEXTS)
    assert body_of(judge)["max_tokens"] == 64  # the client's request, otherwise as it was


async def test_fusion_streams_the_judge_s_answer_in_messages_events(
    relay: Relay, claude: Provider
) -> None:
    await combo(claude, "fusion")
    members_answer(relay)
    judged = streaming(messages_events(["Judged ", "stream."]))
    relay.fake.behaviours[KEYS[0]] = replying(message, TEXTS[0], judged)

    reply = await relay.post(messages_request("team", stream=True))

    assert reply.status == 200 and messages_text(reply) == "Judged stream."
    assert [body_of(r)["stream"] for r in relay.fake.requests if not is_judge(r)] == [False] * 3


async def test_fusion_s_only_answer_streams_as_messages_events(
    relay: Relay, claude: Provider
) -> None:
    await combo(claude, "fusion")
    members_answer(relay)
    relay.fake.behaviours[KEYS[1]] = UNAVAILABLE
    relay.fake.behaviours[KEYS[2]] = UNAVAILABLE

    reply = await relay.post(messages_request("team", stream=True))

    assert reply.status == 200 and messages_text(reply) == TEXTS[0]
    assert b"event: message_stop" in reply.body and reply.decision()["answered"] == "1"


async def test_fusion_without_answers_is_a_503_in_anthropic_s_shape(
    relay: Relay, claude: Provider
) -> None:
    await combo(claude, "fusion")
    overloaded = anthropic_error(529, "overloaded_error", "Overloaded")
    relay.fake.behaviours.update(dict.fromkeys(KEYS, overloaded))

    reply = await relay.post(messages_request("team"))

    assert reply.status == 503
    error = anthropic_shaped(reply)
    assert (error["type"], error["code"]) == ("overloaded_error", "fusion_panel_failed")
    assert "(3 of 3)" in error["message"]


async def test_a_pipeline_hands_each_answer_to_the_next_stage(
    relay: Relay, claude: Provider
) -> None:
    ids = await combo(claude, "pipeline")
    members_answer(relay)

    reply = await relay.post(messages_request("team"))

    assert reply.status == 200 and reply.json() == message(TEXTS[2])
    third = relay.fake.requests[2]
    assert turns(body_of(third)) == [
        QUESTION,
        {"role": "assistant", "content": TEXTS[1]},
        {"role": "user", "content": REVIEW_PROMPT},
    ]
    assert (reply.decision()["stages"], reply.connection) == ("1,2,3", ids[2])


async def test_a_pipeline_s_failing_stage_answers_its_error_in_anthropic_s_shape(
    relay: Relay, claude: Provider
) -> None:
    await combo(claude, "pipeline")
    members_answer(relay)
    relay.fake.behaviours[KEYS[1]] = anthropic_error(400, "invalid_request_error", "bad turn")

    reply = await relay.post(messages_request("team"))

    assert reply.status == 400
    assert anthropic_shaped(reply) == {"type": "invalid_request_error", "message": "bad turn"}
    assert reply.decision()["failed_stage"] == "2"
    assert len(relay.fake.requests) == 2
