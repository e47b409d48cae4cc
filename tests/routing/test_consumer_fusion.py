"""The fusion strategy through the chat consumer: the panel is
asked in parallel, a judge writes one answer from the anonymised sources; no answer is a 503,
one answer is returned as it is; tool requests skip the panel; the client's disconnect and the
stragglers' grace cancel what is still running."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from channels.db import database_sync_to_async

import routing.proxy.preludes.fusion as fusion_prelude
from routing.models import Provider, ProviderConnection
from routing.proxy.guards.admission import admission_stats
from routing.services import connection_save
from routing.strategies.fusion import FusionSettings
from tests.routing.fusion_support import (
    JUDGED,
    KEYS,
    MODELS,
    Hanging,
    body_of,
    completion,
    drafts,
    judge_requests,
    last_turn,
    replying,
    sources_in,
    three_step_combo,
)
from tests.routing.harness import (
    RECEIVE_TIMEOUT_SECONDS,
    UNAVAILABLE,
    FakeWriter,
    Gateway,
    Reply,
    communicator,
    read_reply,
    send_body,
)
from tests.routing.stream_support import answer_chunks, streaming, text_of

pytestmark = pytest.mark.django_db(transaction=True)

TEXTS = ("Paris.", "It is Paris.", "Lyon, surely.")
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


async def ask(gateway: Gateway, *, stream: bool = False, **fields: Any) -> Reply:
    messages = [{"role": "user", "content": "Capital of France?"}]
    body = {"model": "team", "messages": messages, "stream": stream, **fields}
    comm = communicator(gateway.app, gateway.key)
    await send_body(comm, orjson.dumps(body))
    return await read_reply(comm)


@pytest.fixture
async def team(acme: Provider) -> list[int]:
    """A fusion combo over three connections of ``acme`` (models alpha, beta, gamma)."""
    return await database_sync_to_async(three_step_combo)(acme, "fusion")


def cap_at_one(connection_id: int) -> None:
    connection = ProviderConnection.objects.get(pk=connection_id)
    connection_save(connection=connection, fields={"max_concurrent": 1})


def panel_answers(gateway: Gateway, texts: tuple[str, ...] = TEXTS) -> None:
    gateway.fake.behaviours.update(
        {key: replying(completion, text) for key, text in zip(KEYS, texts, strict=True)}
    )


async def test_three_answers_are_judged_anonymously_and_the_client_gets_the_judge_s(
    gateway: Gateway, team: list[int]
) -> None:
    panel_answers(gateway)

    reply = await ask(gateway)

    assert reply.status == 200
    assert reply.json()["choices"][0]["message"]["content"] == JUDGED
    decision = reply.decision()
    assert (decision["strategy"], decision["panel"], decision["answered"]) == ("fusion", "3", "3")
    assert reply.connection == team[0]  # the judge: the first member's model by default
    panel = drafts(gateway.fake.requests)
    assert sorted(body_of(r)["model"] for r in panel) == sorted(MODELS)
    assert all(body_of(r)["stream"] is False for r in panel)
    (judge,) = judge_requests(gateway.fake.requests)
    assert body_of(judge)["model"] == "alpha" and body_of(judge)["stream"] is False
    prompt = last_turn(judge)
    assert sources_in(prompt) == list(TEXTS)  # in the panel's order
    for name in ("acme", *MODELS, "conn-", *KEYS):  # nobody's name reaches the judge
        assert name not in prompt


async def test_a_failing_member_leaves_the_judge_two_sources(
    gateway: Gateway, team: list[int]
) -> None:
    panel_answers(gateway)
    gateway.fake.behaviours[KEYS[1]] = UNAVAILABLE

    reply = await ask(gateway)

    assert reply.status == 200 and reply.decision()["answered"] == "2"
    (judge,) = judge_requests(gateway.fake.requests)
    assert sources_in(last_turn(judge)) == [TEXTS[0], TEXTS[2]]


async def test_a_straggler_is_cut_off_by_the_grace_once_min_panel_answered(
    gateway: Gateway, team: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # given: two members answer at once, the third (capped at one request) never; a 50 ms
    # grace after two answers
    settings = FusionSettings(min_panel=2, straggler_grace_ms=50)
    monkeypatch.setattr(fusion_prelude, "fusion_settings", lambda combo: settings)
    await database_sync_to_async(cap_at_one)(team[2])
    panel_answers(gateway)
    straggler = Hanging()
    gateway.fake.behaviours[KEYS[2]] = straggler

    # when
    reply = await ask(gateway)

    # then: judged from the two; the straggler's request was cancelled, its slot released
    # (its idle gate is forgotten), and nothing charged to it
    assert straggler.asked.is_set() and straggler.cancelled.is_set()
    assert not [g for g in admission_stats()["gates"] if g["gate"] == f"conn:{team[2]}"]
    assert reply.status == 200 and reply.decision()["answered"] == "2"
    (judge,) = judge_requests(gateway.fake.requests)
    assert sources_in(last_turn(judge)) == list(TEXTS[:2])
    assert await gateway.cooling_for(team[2]) == 0
    assert (await gateway.state(team[2])).last_error == ""


async def test_the_hard_limit_ends_the_wait_before_min_panel(
    gateway: Gateway, team: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = FusionSettings(min_panel=3, straggler_grace_ms=60_000, panel_hard_timeout_ms=50)
    monkeypatch.setattr(fusion_prelude, "fusion_settings", lambda combo: settings)
    panel_answers(gateway)
    straggler = Hanging()
    gateway.fake.behaviours[KEYS[2]] = straggler

    reply = await ask(gateway)

    assert straggler.cancelled.is_set()
    assert reply.status == 200 and reply.decision()["answered"] == "2"


async def test_no_answer_at_all_is_a_503_naming_each_member(
    gateway: Gateway, team: list[int]
) -> None:
    gateway.fake.behaviours.update(dict.fromkeys(KEYS, UNAVAILABLE))

    reply = await ask(gateway)

    assert reply.status == 503
    error = reply.json()["error"]
    assert (error["code"], error["type"]) == ("fusion_panel_failed", "service_unavailable")
    assert "(3 of 3)" in error["message"]
    for model in MODELS:
        assert f"acme/{model}: HTTP 503" in error["message"]
    assert [m["model"] for m in reply.json()["diagnostics"]["panel"]] == [
        f"acme/{m}" for m in MODELS
    ]
    assert (reply.decision()["panel"], reply.decision()["answered"]) == ("3", "0")
    assert not judge_requests(gateway.fake.requests)


async def test_exactly_one_answer_is_returned_as_it_is(gateway: Gateway, team: list[int]) -> None:
    panel_answers(gateway)
    gateway.fake.behaviours[KEYS[0]] = UNAVAILABLE
    gateway.fake.behaviours[KEYS[2]] = UNAVAILABLE

    reply = await ask(gateway)

    assert reply.status == 200
    assert reply.json() == completion(TEXTS[1])  # the member's own body
    assert (reply.decision()["answered"], reply.connection) == ("1", team[1])
    assert not judge_requests(gateway.fake.requests)


async def test_exactly_one_answer_streams_to_a_streaming_client(
    gateway: Gateway, team: list[int]
) -> None:
    panel_answers(gateway)
    gateway.fake.behaviours[KEYS[0]] = UNAVAILABLE
    gateway.fake.behaviours[KEYS[2]] = UNAVAILABLE

    reply = await ask(gateway, stream=True)

    assert reply.status == 200 and reply.headers["content-type"] == "text/event-stream"
    assert text_of(reply) == TEXTS[1]
    assert reply.body.endswith(b"data: [DONE]\n\n")


def with_usage(text: str) -> dict[str, Any]:
    return {**completion(text), "usage": {"prompt_tokens": 9, "completion_tokens": 4}}


@pytest.mark.parametrize("asked", [False, True])
async def test_the_one_answer_s_usage_streams_only_to_a_client_that_asked_and_is_counted(
    gateway: Gateway, team: list[int], asked: bool, request_log: FakeWriter
) -> None:
    gateway.fake.behaviours[KEYS[1]] = replying(with_usage, TEXTS[1])
    gateway.fake.behaviours[KEYS[0]] = UNAVAILABLE
    gateway.fake.behaviours[KEYS[2]] = UNAVAILABLE
    options = {"stream_options": {"include_usage": True}} if asked else {}

    reply = await ask(gateway, stream=True, **options)

    assert text_of(reply) == TEXTS[1] and reply.body.endswith(b"data: [DONE]\n\n")
    assert (b'"usage"' in reply.body) is asked
    [record] = request_log.records
    assert (record.tokens_in, record.tokens_out) == (9, 4)


async def test_a_tool_request_goes_to_the_judge_only(gateway: Gateway, team: list[int]) -> None:
    panel_answers(gateway)

    reply = await ask(gateway, tools=TOOLS, tool_choice="auto")

    assert reply.status == 200 and reply.json() == completion(TEXTS[0])
    (only,) = gateway.fake.requests
    assert (body_of(only)["model"], body_of(only)["tools"]) == ("alpha", TOOLS)
    assert (reply.decision()["panel"], reply.decision()["bypass"]) == ("3", "tools")


async def test_a_streaming_client_gets_the_judge_s_stream(
    gateway: Gateway, team: list[int]
) -> None:
    panel_answers(gateway)
    judge_stream = streaming(answer_chunks(["The ", "judged ", "stream."]))
    gateway.fake.behaviours[KEYS[0]] = replying(completion, TEXTS[0], judge_stream)

    reply = await ask(gateway, stream=True)

    assert reply.status == 200 and reply.headers["content-type"] == "text/event-stream"
    assert text_of(reply) == "The judged stream."
    assert all(body_of(r)["stream"] is False for r in drafts(gateway.fake.requests))
    (judge,) = judge_requests(gateway.fake.requests)
    assert body_of(judge)["stream"] is True
    assert reply.decision()["answered"] == "3"


async def test_a_judge_model_of_its_own_is_asked_on_its_own_targets(
    gateway: Gateway, team: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = FusionSettings(judge_model="acme/judge")
    monkeypatch.setattr(fusion_prelude, "fusion_settings", lambda combo: settings)
    panel_answers(gateway)

    reply = await ask(gateway)

    assert reply.status == 200 and reply.json()["choices"][0]["message"]["content"] == JUDGED
    (judge,) = judge_requests(gateway.fake.requests)
    assert body_of(judge)["model"] == "judge"


async def test_the_client_leaving_cancels_every_member_in_flight(
    gateway: Gateway, team: list[int]
) -> None:
    members = [Hanging(), Hanging(), Hanging()]
    gateway.fake.behaviours.update(zip(KEYS, members, strict=True))
    comm = communicator(gateway.app, gateway.key)
    body = {"model": "team", "messages": [{"role": "user", "content": "hi"}]}
    await send_body(comm, orjson.dumps(body))
    for member in members:
        await asyncio.wait_for(member.asked.wait(), RECEIVE_TIMEOUT_SECONDS)

    await comm.send_input({"type": "http.disconnect"})

    for member in members:
        await asyncio.wait_for(member.cancelled.wait(), RECEIVE_TIMEOUT_SECONDS)
    await comm.wait(RECEIVE_TIMEOUT_SECONDS)
