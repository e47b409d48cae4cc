"""The client APIs over real HTTP, with the official SDKs as clients and unchanged: OpenAI Chat
Completions and Responses (``openai``), Anthropic Messages (``anthropic``); failover,
cooldowns and the in-band error on a cut stream on each new endpoint; dynamic tool limits."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from omniroute.tools.fakeupstream.wire import content
from tests.e2e.conftest import Gateway, Route, make_route, records

pytestmark = pytest.mark.e2e

CHUNKS, SIZE = 6, 8
WHOLE = content(CHUNKS * SIZE)
SHAPE = {"chunks": CHUNKS, "chunk_size": SIZE}
CUT = {**SHAPE, "chunk_interval_ms": 20, "cut": "mid", "mid_at": 3}
DOWN = {"status": 503}
LIMITED = {"status": 429, "retry_after": "120"}  # longer than any wait: fail over and lock
RESPONSES, MESSAGES = "/responses", "/messages"


def openai_sdk(gateway: Gateway, route: Route) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=route.key, max_retries=0)


def anthropic_sdk(gateway: Gateway, route: Route) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gateway.url, api_key=route.key, max_retries=0)


def anthropic_route(gateway: Gateway, fake: FakeUpstream, *scenarios: dict[str, Any]) -> Route:
    return make_route(gateway, fake, *scenarios, wire_format="anthropic")


def ask(sdk: anthropic.Anthropic, route: Route, **extra: Any) -> anthropic.types.Message:
    return sdk.messages.create(
        model=route.model(), max_tokens=64, messages=[{"role": "user", "content": "x"}], **extra
    )


def calls(fake: FakeUpstream, route: Route, path: str) -> list[int]:
    """Which connection (1, 2, ...) each of the route's requests to ``path`` went to."""
    return [
        int(r.path.split(f"/r/{route.provider}/c", 1)[1].split("/", 1)[0])
        for r in records(fake, route, path=path)
    ]


# --- the SDKs, unchanged --------------------------------------------------------------------


def test_openai_chat_completions_plain_and_streamed(gateway: Gateway, fake: FakeUpstream) -> None:
    route = make_route(gateway, fake, SHAPE)
    sdk = openai_sdk(gateway, route)
    messages: Any = [{"role": "user", "content": "x"}]

    plain = sdk.chat.completions.create(model=route.model(), messages=messages)
    chunks = list(sdk.chat.completions.create(model=route.model(), messages=messages, stream=True))

    assert plain.choices[0].message.content == WHOLE
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == WHOLE


def test_openai_responses_plain_streamed_and_helper(gateway: Gateway, fake: FakeUpstream) -> None:
    route = make_route(gateway, fake, SHAPE)
    sdk = openai_sdk(gateway, route)

    plain = sdk.responses.create(model=route.model(), input="x")
    events = list(sdk.responses.create(model=route.model(), input="x", stream=True))
    with sdk.responses.stream(model=route.model(), input="x") as stream:
        final = stream.get_final_response()

    assert plain.output_text == WHOLE
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == WHOLE
    assert events[-1].type == "response.completed"
    assert final.output_text == WHOLE
    assert calls(fake, route, RESPONSES) == [1, 1, 1]


def test_anthropic_messages_create_and_stream(gateway: Gateway, fake: FakeUpstream) -> None:
    route = anthropic_route(gateway, fake, SHAPE)
    sdk = anthropic_sdk(gateway, route)

    beta = {"anthropic-beta": "prompt-caching-2024-07-31"}
    message = ask(sdk, route, extra_headers=beta)
    with sdk.messages.stream(
        model=route.model(), max_tokens=64, messages=[{"role": "user", "content": "x"}]
    ) as stream:
        text = stream.get_final_text()

    assert message.content[0].type == "text" and message.content[0].text == WHOLE
    assert text == WHOLE
    sent = records(fake, route, path=MESSAGES)
    assert [r.stream for r in sent] == [False, True]
    if sent[0].headers:  # the fake records headers when recording is on
        assert sent[0].headers["anthropic-version"]  # the SDK's own, passed through
        assert sent[0].headers["anthropic-beta"] == beta["anthropic-beta"]
        assert route.key not in str(sent[0].headers)  # the client's key never goes up


def test_each_sdk_lists_and_retrieves_models_in_its_shape(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, SHAPE, served_models=["gpt-test"])
    model = route.model()
    listed = [m.id for m in openai_sdk(gateway, route).models.list()]
    one = openai_sdk(gateway, route).models.retrieve(model)
    claude = anthropic_sdk(gateway, route)

    assert model in listed and one.id == model
    assert model in [m.id for m in claude.models.list()]
    assert claude.models.retrieve(model).id == model
    with pytest.raises(anthropic.NotFoundError):
        claude.models.retrieve(f"{route.provider}/nope")


def test_a_request_for_another_wire_format_is_a_404_saying_why(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, SHAPE)  # OpenAI-format

    with pytest.raises(anthropic.NotFoundError) as refused:
        ask(anthropic_sdk(gateway, route), route)

    body: Any = refused.value.body
    assert (body["type"], body["error"]["code"]) == ("error", "no_executable_targets")
    assert records(fake, route, path=MESSAGES) == []


# --- failover and cooldowns on the new endpoints -------------------------------------------


def test_responses_fail_over_and_a_long_retry_after_locks_the_pair(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    down = make_route(gateway, fake, DOWN, SHAPE)
    limited = make_route(gateway, fake, LIMITED, SHAPE)

    served = openai_sdk(gateway, down).responses.create(model=down.model(), input="x")
    first = openai_sdk(gateway, limited).responses.create(model=limited.model(), input="x")
    second = openai_sdk(gateway, limited).responses.create(model=limited.model(), input="x")

    assert served.output_text == WHOLE
    assert calls(fake, down, RESPONSES) == [1, 1, 2]  # a 5xx is retried once, then next
    assert first.output_text == second.output_text == WHOLE
    assert calls(fake, limited, RESPONSES) == [1, 2, 2]  # the locked pair is skipped


def test_messages_fail_over_and_a_long_retry_after_locks_the_pair(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    down = anthropic_route(gateway, fake, DOWN, SHAPE)
    limited = anthropic_route(gateway, fake, LIMITED, SHAPE)

    served = ask(anthropic_sdk(gateway, down), down)
    first = ask(anthropic_sdk(gateway, limited), limited)
    second = ask(anthropic_sdk(gateway, limited), limited)

    assert served.content[0].text == WHOLE  # type: ignore[union-attr]
    assert calls(fake, down, MESSAGES) == [1, 1, 2]
    assert first.content[0].text == second.content[0].text == WHOLE  # type: ignore[union-attr]
    assert calls(fake, limited, MESSAGES) == [1, 2, 2]


def test_an_anthropic_error_reaches_the_client_in_anthropic_shape(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = anthropic_route(gateway, fake, {"status": 400})

    with pytest.raises(anthropic.BadRequestError) as refused:
        ask(anthropic_sdk(gateway, route), route)

    body: Any = refused.value.body
    assert (body["type"], body["error"]["type"]) == ("error", "invalid_request_error")


# --- a stream cut after commit ends with the API's own in-band error ------------------------


def test_a_cut_responses_stream_ends_with_an_error_event(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, CUT)

    events = list(
        openai_sdk(gateway, route).responses.create(model=route.model(), input="x", stream=True)
    )

    assert events[-1].type == "error"
    assert events[-1].code == "upstream_stream_interrupted"
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == WHOLE[: 3 * SIZE]  # what came before the cut, once
    assert not any(e.type == "response.completed" for e in events)


def test_a_cut_messages_stream_raises_in_the_anthropic_sdk(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = anthropic_route(gateway, fake, CUT)
    received: list[str] = []

    with pytest.raises(anthropic.APIStatusError) as broken:
        with anthropic_sdk(gateway, route).messages.stream(
            model=route.model(), max_tokens=64, messages=[{"role": "user", "content": "x"}]
        ) as stream:
            received.extend(stream.text_stream)

    assert "".join(received) == WHOLE[: 3 * SIZE]
    body: Any = broken.value.body
    assert body["error"]["code"] == "upstream_stream_interrupted"


# --- dynamic tool limits --------------------------------------------------------------------


def test_a_learnt_tool_limit_skips_the_target_without_touching_it(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, {**SHAPE, "max_tools": 128}, SHAPE)
    tools: Any = [
        {"type": "function", "function": {"name": f"t{i}", "parameters": {"type": "object"}}}
        for i in range(200)
    ]
    sdk = openai_sdk(gateway, route)
    messages: Any = [{"role": "user", "content": "x"}]

    first = sdk.chat.completions.with_raw_response.create(
        model=route.model(), messages=messages, tools=tools
    )
    second = sdk.chat.completions.with_raw_response.create(
        model=route.model(), messages=messages, tools=tools
    )

    assert first.parse().choices[0].message.content == WHOLE
    assert calls(fake, route, "/completions") == [1, 2, 2]  # the second never asked the first
    assert "tool_limit" in second.headers["x-omniroute-decision"]


def test_a_cut_messages_stream_is_finished_by_the_next_connection(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = anthropic_route(gateway, fake, CUT, SHAPE)

    with anthropic_sdk(gateway, route).messages.stream(
        model=route.model(), max_tokens=64, messages=[{"role": "user", "content": "x"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()

    assert text == WHOLE  # regenerated and spliced where the client's copy stopped: nothing twice
    assert final.stop_reason == "end_turn"
    assert calls(fake, route, MESSAGES) == [1, 2]
