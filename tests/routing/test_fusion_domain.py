"""The fusion and pipeline strategies' pure parts:
answer text per client API, the requests a panel member, the judge and a pipeline stage get,
the settings, the grouping of a plan into members, and one answer replayed as a stream."""

from __future__ import annotations

from typing import Any

import pytest

from routing.domain.client.conversations import (
    CHAT,
    MESSAGES,
    RESPONSES,
    chat_answer_text,
    conversation_for,
    messages_answer_text,
    responses_answer_text,
)
from routing.domain.client.endpoints import CHAT_COMPLETIONS, Endpoint
from routing.domain.client.endpoints import MESSAGES as MESSAGES_API
from routing.domain.client.endpoints import RESPONSES as RESPONSES_API
from routing.domain.config.snapshot import ConnectionInfo, ProviderInfo
from routing.domain.plan.planning import Target
from routing.domain.streams.answer import answer_as_stream
from routing.domain.streams.sse import SseSplitter
from routing.domain.streams.state import Kind
from routing.strategies import fusion

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]


# --- an answer's text, per client API ---------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "text"),
    [
        ({"choices": [{"message": {"role": "assistant", "content": "Paris."}}]}, "Paris."),
        (
            {
                "choices": [
                    {
                        "message": {
                            "content": [
                                {"type": "text", "text": "Pa"},
                                {"type": "text", "text": "ris."},
                            ]
                        }
                    }
                ]
            },
            "Paris.",
        ),
        ({"choices": [{"message": {"content": None, "tool_calls": [{"id": "c1"}]}}]}, None),
        ({"choices": []}, None),
        ({"error": "nothing here"}, None),
    ],
)
def test_chat_text_is_the_first_choice_s_content(answer: dict[str, Any], text: str | None) -> None:
    assert chat_answer_text(answer) == text


@pytest.mark.parametrize(
    ("content", "text"),
    [
        (
            [
                {"type": "text", "text": "Par"},
                {"type": "tool_use", "id": "t"},
                {"type": "text", "text": "is."},
            ],
            "Paris.",
        ),
        ([{"type": "thinking", "thinking": "hmm"}], None),
        (None, None),
    ],
)
def test_messages_text_is_the_text_blocks_joined(content: Any, text: str | None) -> None:
    assert messages_answer_text({"type": "message", "content": content}) == text


def test_responses_text_is_output_text_when_given() -> None:
    assert responses_answer_text({"output_text": "Paris.", "output": []}) == "Paris."


def test_responses_text_is_else_the_output_messages_text() -> None:
    output = [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "thinking"}]},
        {
            "type": "message",
            "content": [
                {"type": "output_text", "text": "Par"},
                {"type": "refusal", "refusal": "no"},
            ],
        },
        {"type": "message", "content": [{"type": "output_text", "text": "is."}]},
    ]

    assert responses_answer_text({"output": output}) == "Paris."
    assert responses_answer_text({"output": [output[0]]}) is None


def test_every_client_api_has_its_conversation_shape() -> None:
    assert conversation_for(CHAT_COMPLETIONS.name) is CHAT
    assert conversation_for(MESSAGES_API.name) is MESSAGES
    assert conversation_for(RESPONSES_API.name) is RESPONSES
    assert conversation_for("embeddings") is None


# --- the requests -----------------------------------------------------------------------------


def test_a_draft_is_not_streamed_and_carries_no_tools() -> None:
    payload = {
        "model": "team",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": TOOLS,
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "temperature": 0.3,
    }

    draft = fusion.draft_payload(payload)

    assert draft == {
        "model": "team",
        "messages": payload["messages"],
        "stream": False,
        "temperature": 0.3,
    }
    assert payload["stream"] is True and payload["tools"] == TOOLS  # the client's is untouched


def test_the_judge_prompt_names_sources_by_number_only() -> None:
    prompt = fusion.judge_prompt(["  Paris.\n", "It is Paris.", "Lyon."])

    assert "Source 1 to Source 3" in prompt
    for n, text in enumerate(["Paris.", "It is Paris.", "Lyon."], start=1):
        assert f"--- Source {n} ---\n{text}\n" in prompt
    assert "Source 4" not in prompt
    assert prompt.endswith(fusion.JUDGE_TASK)


def test_the_judge_gets_the_client_s_request_with_one_more_user_turn() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital?"}]
    payload = {"model": "team", "messages": messages, "stream": True, "tools": TOOLS}

    judged = fusion.judge_payload(CHAT, payload, ["Paris.", "Paris, France."])

    assert judged["messages"][:2] == messages
    assert judged["messages"][2] == {
        "role": "user",
        "content": fusion.judge_prompt(["Paris.", "Paris, France."]),
    }
    assert (judged["stream"], judged["tools"]) == (True, TOOLS)  # the client's own
    assert len(messages) == 2  # the client's list is not changed in place


def test_a_responses_string_input_becomes_the_first_user_turn() -> None:
    payload = {"model": "team", "input": "Capital of France?", "instructions": "Be brief."}

    judged = fusion.judge_payload(RESPONSES, payload, ["Paris.", "Paris"])

    assert judged["input"][0] == {"role": "user", "content": "Capital of France?"}
    assert judged["input"][1]["role"] == "user" and "Source 2" in judged["input"][1]["content"]
    assert judged["instructions"] == "Be brief."


def test_a_later_stage_reviews_the_previous_answer() -> None:
    payload = {
        "model": "flow",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "Write a haiku."}],
    }

    first = fusion.stage_payload(MESSAGES, payload, None)
    second = fusion.stage_payload(MESSAGES, payload, "Old pond, a frog.")

    assert first == payload
    assert second["messages"] == [
        {"role": "user", "content": "Write a haiku."},
        {"role": "assistant", "content": "Old pond, a frog."},
        {"role": "user", "content": fusion.REVIEW_PROMPT},
    ]
    assert second["max_tokens"] == 64


@pytest.mark.parametrize(
    ("fields", "bears"),
    [
        ({}, False),
        ({"tools": []}, False),
        ({"tools": TOOLS}, True),
        ({"tools": TOOLS, "tool_choice": "auto"}, True),
        ({"tools": TOOLS, "tool_choice": "none"}, False),
        ({"tools": TOOLS, "tool_choice": {"type": "none"}}, False),  # Anthropic's shape
        ({"tools": TOOLS, "tool_choice": {"type": "any"}}, True),
        ({"tool_choice": "required"}, False),
    ],
)
def test_a_request_bears_tools_when_it_declares_some_it_may_call(
    fields: dict[str, Any], bears: bool
) -> None:
    assert fusion.bears_tools({"model": "team", **fields}) is bears


# --- settings and grouping --------------------------------------------------------------------


def test_the_settings_default_to_the_reference_s() -> None:
    settings = fusion.fusion_settings(None)

    assert settings == fusion.FusionSettings(None, 2, 8_000, 90_000)


@pytest.mark.parametrize(
    ("min_panel", "size", "quorum"), [(2, 3, 2), (5, 3, 3), (1, 3, 2), (0, 4, 2), (3, 4, 3)]
)
def test_the_quorum_is_min_panel_clamped_to_two_and_the_panel_size(
    min_panel: int, size: int, quorum: int
) -> None:
    assert fusion.FusionSettings(min_panel=min_panel).quorum(size) == quorum


def target(step: int, connection: int, model: str = "m1") -> Target:
    provider = ProviderInfo("acme", "Acme", "api_key", "http://acme.test/v1", "openai")
    info = ConnectionInfo(connection, "acme", f"c{connection}", 10, provider.base_url, "api_key")
    return Target(provider, info, model, step)


def test_a_plan_groups_into_its_steps_in_the_plan_s_order() -> None:
    a1, b1, a2, c1 = target(0, 1), target(1, 1), target(0, 2), target(2, 1)

    assert fusion.groups([b1, a1, c1, a2]) == ((b1,), (a1, a2), (c1,))


# --- one answer replayed as a stream ----------------------------------------------------------

CHAT_ANSWER = {
    "id": "chatcmpl-9",
    "object": "chat.completion",
    "created": 1,
    "model": "m1",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Paris."}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
}
MESSAGES_ANSWER = {
    "id": "msg_9",
    "type": "message",
    "role": "assistant",
    "model": "opus",
    "content": [{"type": "text", "text": "Paris."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 3, "output_tokens": 2},
}
RESPONSES_ANSWER = {
    "id": "resp_9",
    "object": "response",
    "status": "completed",
    "model": "m1",
    "output": [
        {
            "id": "msg_9",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Paris.", "annotations": []}],
        }
    ],
}


@pytest.mark.parametrize(
    ("endpoint", "answer"),
    [
        (CHAT_COMPLETIONS, CHAT_ANSWER),
        (MESSAGES_API, MESSAGES_ANSWER),
        (RESPONSES_API, RESPONSES_ANSWER),
    ],
    ids=["chat", "messages", "responses"],
)
def test_one_answer_replays_as_a_whole_stream_the_gateway_s_own_reader_accepts(
    endpoint: Endpoint, answer: dict[str, Any]
) -> None:
    # given: the stream of the answer, read as the gateway reads an upstream's
    stream = answer_as_stream(endpoint.name, answer, "Paris.")
    state = endpoint.stream_state()
    splitter = SseSplitter()

    # when
    kinds = [state.observe(event)[0] for event in splitter.feed(stream)]

    # then: one token with the whole text, finished, ended by the API's own end event
    assert splitter.empty and Kind.MALFORMED not in kinds and Kind.ERROR not in kinds
    assert kinds.count(Kind.TOKEN) == 1 and kinds[-1] is Kind.DONE
    assert "".join(state.text) == "Paris." and state.finished
    assert state.envelope is not None and state.envelope["id"] == answer["id"]
