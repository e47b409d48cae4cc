"""Fusion and pipeline combos on ``POST /v1/responses``:
the answers' text is ``output_text`` or the output messages' text, the turns go to ``input``
(a string input becomes its first user turn); a request continuing a stored response
(``previous_response_id``) is refused, since that conversation lives at one account."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async

from routing.models import Provider
from routing.strategies.fusion import REVIEW_PROMPT
from tests.routing.format_support import (
    Relay,
    response_object,
    responses_request,
    responses_text,
)
from tests.routing.fusion_support import (
    JUDGED,
    KEYS,
    body_of,
    judge_requests,
    last_turn,
    replying,
    sources_in,
    three_step_combo,
    turns,
)
from tests.routing.harness import UNAVAILABLE

pytestmark = pytest.mark.django_db(transaction=True)

TEXTS = ("Paris.", "It is Paris.", "Lyon, surely.")
QUESTION = {"role": "user", "content": "Say hi"}  # responses_request's input, as a turn


def response(text: str) -> dict[str, Any]:
    return response_object(text=text)


async def combo(acme: Provider, strategy: str) -> list[int]:
    return await database_sync_to_async(three_step_combo)(acme, strategy)


def members_answer(relay: Relay) -> None:
    relay.fake.behaviours.update(
        {key: replying(response, text) for key, text in zip(KEYS, TEXTS, strict=True)}
    )


async def test_fusion_judges_three_answers_into_one_response(relay: Relay, acme: Provider) -> None:
    await combo(acme, "fusion")
    members_answer(relay)

    reply = await relay.post(responses_request("team", instructions="Be brief."))

    assert reply.status == 200 and reply.json() == response(JUDGED)
    (judge,) = judge_requests(relay.fake.requests)
    assert turns(body_of(judge))[0] == QUESTION
    assert sources_in(last_turn(judge)) == list(TEXTS)
    assert body_of(judge)["instructions"] == "Be brief."
    assert reply.decision()["answered"] == "3"


async def test_fusion_s_only_answer_streams_as_responses_events(
    relay: Relay, acme: Provider
) -> None:
    ids = await combo(acme, "fusion")
    members_answer(relay)
    relay.fake.behaviours[KEYS[0]] = UNAVAILABLE
    relay.fake.behaviours[KEYS[1]] = UNAVAILABLE

    reply = await relay.post(responses_request("team", stream=True))

    assert reply.status == 200 and responses_text(reply) == TEXTS[2]
    assert b"event: response.completed" in reply.body
    # a later request continuing this response goes to the member that gave it
    assert await relay.store.get("response-pin:resp_1") == ids[2]


async def test_a_pipeline_hands_each_answer_to_the_next_stage(relay: Relay, acme: Provider) -> None:
    await combo(acme, "pipeline")
    members_answer(relay)

    reply = await relay.post(responses_request("team"))

    assert reply.status == 200 and reply.json() == response(TEXTS[2])
    assert body_of(relay.fake.requests[0])["input"] == "Say hi"  # the first stage: as sent
    assert turns(body_of(relay.fake.requests[2])) == [
        QUESTION,
        {"role": "assistant", "content": TEXTS[1]},
        {"role": "user", "content": REVIEW_PROMPT},
    ]


@pytest.mark.parametrize("strategy", ["fusion", "pipeline"])
async def test_continuing_a_stored_response_is_refused(
    relay: Relay, acme: Provider, strategy: str
) -> None:
    await combo(acme, strategy)
    members_answer(relay)

    reply = await relay.post(responses_request("team", previous_response_id="resp_0"))

    assert reply.status == 400
    assert reply.json()["error"]["code"] == "unsupported_for_strategy"
    assert "previous_response_id" in reply.json()["error"]["message"]
    assert relay.fake.requests == []
