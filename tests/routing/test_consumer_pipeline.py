"""The pipeline strategy through the chat consumer: the stages
run in order, each later one reviewing the previous one's answer; only the last stage's answer
reaches the client, streamed if asked; a failing stage ends the request with its error."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from channels.db import database_sync_to_async

from routing.models import Combo, Provider
from routing.services import combo_save
from routing.strategies.fusion import REVIEW_PROMPT
from tests.routing.fusion_support import (
    KEYS,
    body_of,
    completion,
    replying,
    three_step_combo,
    turns,
)
from tests.routing.harness import (
    Gateway,
    Reply,
    add_connection,
    add_provider,
    communicator,
    error,
    read_reply,
    send_body,
)
from tests.routing.stream_support import answer_chunks, streaming, text_of

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = {"role": "user", "content": "Write a haiku about autumn."}
DRAFTS = ("First draft.", "Second draft.", "Final haiku.")
BRAVO_DOWN, BRAVO_UP = "sk-bravo-DOWN-0001", "sk-bravo-UP-0002"
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


async def ask(gateway: Gateway, *, stream: bool = False, **fields: Any) -> Reply:
    body = {"model": "team", "messages": [QUESTION], "stream": stream, **fields}
    comm = communicator(gateway.app, gateway.key)
    await send_body(comm, orjson.dumps(body))
    return await read_reply(comm)


@pytest.fixture
async def team(acme: Provider) -> list[int]:
    """A pipeline over three connections of ``acme`` (models alpha, beta, gamma)."""
    return await database_sync_to_async(three_step_combo)(acme, "pipeline")


def stages_answer(gateway: Gateway) -> None:
    gateway.fake.behaviours.update(
        {key: replying(completion, text) for key, text in zip(KEYS, DRAFTS, strict=True)}
    )


def sent_by(gateway: Gateway, key: str) -> dict[str, Any]:
    (request,) = [r for r in gateway.fake.requests if r.headers["authorization"] == f"Bearer {key}"]
    return body_of(request)


async def test_each_stage_reviews_the_previous_and_the_client_gets_the_last(
    gateway: Gateway, team: list[int]
) -> None:
    stages_answer(gateway)

    reply = await ask(gateway)

    assert reply.status == 200 and reply.json() == completion(DRAFTS[2])
    assert [body_of(r)["model"] for r in gateway.fake.requests] == ["alpha", "beta", "gamma"]
    assert turns(sent_by(gateway, KEYS[0])) == [QUESTION]
    third = turns(sent_by(gateway, KEYS[2]))
    assert third == [
        QUESTION,
        {"role": "assistant", "content": DRAFTS[1]},  # the second stage's answer only
        {"role": "user", "content": REVIEW_PROMPT},
    ]
    assert turns(sent_by(gateway, KEYS[1]))[1] == {"role": "assistant", "content": DRAFTS[0]}
    assert (reply.decision()["strategy"], reply.decision()["stages"]) == ("pipeline", "1,2,3")
    assert reply.connection == team[2]


async def test_a_streaming_client_gets_the_last_stage_s_stream(
    gateway: Gateway, team: list[int]
) -> None:
    stages_answer(gateway)
    gateway.fake.behaviours[KEYS[2]] = streaming(answer_chunks(["Crisp ", "leaves."]))

    reply = await ask(gateway, stream=True)

    assert reply.status == 200 and text_of(reply) == "Crisp leaves."
    streams = [body_of(r)["stream"] for r in gateway.fake.requests]
    assert streams == [False, False, True]  # every stage but the last: not streamed


async def test_a_failing_middle_stage_ends_the_request_with_its_error(
    gateway: Gateway, team: list[int]
) -> None:
    stages_answer(gateway)
    gateway.fake.behaviours[KEYS[1]] = error(400, "messages are malformed", "invalid_request")

    reply = await ask(gateway)

    assert reply.status == 400
    assert reply.json()["error"]["message"] == "messages are malformed"
    assert (reply.decision()["stages"], reply.decision()["failed_stage"]) == ("1,2", "2")
    assert [body_of(r)["model"] for r in gateway.fake.requests] == ["alpha", "beta"]


async def test_a_stage_fails_over_within_its_own_targets(gateway: Gateway, acme: Provider) -> None:
    # given: the middle step is a model of ``bravo``, whose first connection is down
    def middle_on_two_connections() -> None:
        bravo = add_provider("bravo")
        first = add_connection(acme, "first", KEYS[0], priority=10)
        last = add_connection(acme, "last", KEYS[2], priority=30)
        for name, key, priority in (("down", BRAVO_DOWN, 10), ("up", BRAVO_UP, 20)):
            add_connection(bravo, name, key, priority=priority)
        targets = [
            {"provider": acme, "model": "alpha", "connection_id": first},
            {"provider": bravo, "model": "beta"},
            {"provider": acme, "model": "gamma", "connection_id": last},
        ]
        combo_save(combo=Combo(), fields={"name": "team", "strategy": "pipeline"}, targets=targets)

    await database_sync_to_async(middle_on_two_connections)()
    stages_answer(gateway)
    gateway.fake.behaviours[BRAVO_DOWN] = error(503, "down")
    gateway.fake.behaviours[BRAVO_UP] = replying(completion, "Spare draft.")

    reply = await ask(gateway)

    assert reply.status == 200 and reply.json() == completion(DRAFTS[2])
    assert turns(sent_by(gateway, KEYS[2]))[1] == {"role": "assistant", "content": "Spare draft."}
    calls = gateway.fake.calls  # the down connection as often as the attempt policy says
    assert (calls[0], set(calls[1:-2]), calls[-2:]) == (KEYS[0], {BRAVO_DOWN}, [BRAVO_UP, KEYS[2]])


async def test_a_one_step_pipeline_is_an_ordinary_request(gateway: Gateway, acme: Provider) -> None:
    def one_step() -> None:
        cid = add_connection(acme, "only", KEYS[0], priority=10)
        targets = [{"provider": acme, "model": "alpha", "connection_id": cid}]
        combo_save(combo=Combo(), fields={"name": "team", "strategy": "pipeline"}, targets=targets)

    await database_sync_to_async(one_step)()
    gateway.fake.behaviours[KEYS[0]] = streaming(answer_chunks(["Just ", "one."]))

    reply = await ask(gateway, stream=True)

    assert reply.status == 200 and text_of(reply) == "Just one."
    (only,) = gateway.fake.requests
    assert body_of(only)["stream"] is True and turns(body_of(only)) == [QUESTION]
    assert reply.decision()["stages"] == "1"


async def test_a_tool_request_goes_to_the_last_stage_only(
    gateway: Gateway, team: list[int]
) -> None:
    stages_answer(gateway)

    reply = await ask(gateway, tools=TOOLS)

    assert reply.status == 200 and reply.json() == completion(DRAFTS[2])
    (only,) = gateway.fake.requests
    assert (body_of(only)["model"], body_of(only)["tools"]) == ("gamma", TOOLS)
    assert reply.decision()["bypass"] == "tools"
